"""Half literals rounded once (porter/emulate/include/porter/half_literal.h): a cooked
`operator""h(long double)` rounds the literal to the long double and then to half, so a decimal
within a long double's step of a tie between two halves was read on the tie (review 36's K01; a
header's literal and a token-pasted one were still read so: review 37's N04, N07). The shim's
literal operator reads the characters; each literal here is checked against the exact rounding
of its value (Fraction arithmetic)."""

from __future__ import annotations

import random
import shutil
import subprocess
from fractions import Fraction

import pytest
import torch

from porter.emulate.headers import SHIM_DIR
from porter.emulate.torch_run import run_registration

TIE_ABOVE = "1.0004882812500000000009"      # 1 + 2^-11 (a tie) + 9e-22


def nearest_half(value: Fraction) -> float:
    """The half nearest `value`, ties to even; inf from 65520 (the oracle)."""
    if value < 0:
        return -nearest_half(-value)
    if value >= 65520:
        return float("inf")
    if value == 0:
        return 0.0
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exponent > value:
        exponent -= 1
    ulp = Fraction(2) ** (max(exponent, -14) - 10)
    steps, rest = divmod(value / ulp, 1)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and steps % 2 == 1):
        steps += 1
    return float(steps * ulp)


CHOSEN = [
    TIE_ABOVE, "1.00048828125", "1.0004882812499999999999", "1.00146484375", "0.1", "65504",
    "65519.99", "65520", "65520.000000000000000000001", "5.960464477539063e-8",
    "2.98023223876953125e-8", "2.98023223876953125000000001e-8", "1e-30", "1e10", ".5", "2.",
    "1e2", "6.103515625e-05", "0.000123456789", "12345.678", "0.0", "0e0",
    "1.000'488'281'250'000'000'000'9", "1'024.5",
]
HEXADECIMAL = {"0x1.002p0": 1.0, "0x1.0020000000000000001p0": 1.0009765625, "0x1p-24": 2.0 ** -24,
               "0x1p-25": 0.0, "0x1.8p-25": 2.0 ** -24, "0X1.FFCp15": 65504.0, "0x1.ffdp15": 65504.0,
               "0x1.ffep15": float("inf"), "0x1.fffp15": float("inf")}


def _near_ties(n: int) -> list[str]:
    """Decimals within 10^-15 .. 10^-30 (relative) of a tie between two halves, or on it."""
    rng = random.Random(33)
    out = []
    for _ in range(n):
        e = rng.randint(-24, 15)
        mid = (Fraction(2 * rng.randint(1024, 2047) + 1, 2) * Fraction(2) ** (e - 10) if e >= -14
               else Fraction(2 * rng.randint(0, 1023) + 1, 2) * Fraction(2) ** -24)
        v = mid * (1 + Fraction(rng.choice([-1, 0, 1]), 10 ** rng.randint(15, 30)))
        exp = 0
        while v >= 10:
            v, exp = v / 10, exp + 1
        while v < 1:
            v, exp = v * 10, exp - 1
        digits = str(int(v * 10 ** 34))
        out.append(f"{digits[0]}.{digits[1:]}e{exp}")
    return out


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_half_literal_is_its_value_rounded_once(tmp_path):
    literals = CHOSEN + _near_ties(300)
    src = tmp_path / "h.cpp"
    src.write_text("#include <cstdio>\n#include <porter/half_literal.h>\n"
                   "#define PASTED(x) x##h\n"
                   "static const _Float16 t[] = {\n"
                   + ",\n".join(f"{s}h" for s in literals) + ",\n"
                   + ",\n".join(f"{s}H" for s in HEXADECIMAL)
                   + f",\nPASTED({TIE_ABOVE})}};\n"
                   'int main() { for (auto x : t) std::printf("%a\\n", double(x)); }\n')
    subprocess.run(["g++", "-std=c++17", "-w", f"-I{SHIM_DIR}", str(src), "-o",
                    str(tmp_path / "h")], check=True)
    got = [float.fromhex(x) for x in subprocess.run(
        [str(tmp_path / "h")], capture_output=True, text=True, check=True).stdout.split()]
    want = ([nearest_half(Fraction(s.replace("'", ""))) for s in literals]
            + list(HEXADECIMAL.values()) + [1.0009765625])
    assert [(s, g) for s, g, w in zip(literals + list(HEXADECIMAL) + ["pasted"], got, want)
            if g != w] == []
    # the cooked operator's reading, which the shim's replaced: 1.0, on the tie, to even
    assert got[0] == 1.0009765625


HEADER_LITERAL = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
#define HV_H(x) x##h
struct above_functor {
  inline half operator()(const half x) {
    return HV_H(TIE) > 1.0h ? x : -x;
  }
};
REGISTER_UNARY_OP(above, half, half);
""".replace("TIE", TIE_ABOVE)


def test_a_pasted_half_literal_builds_rounded_once(fixture_root, client, tmp_path):
    # review 37's N07: `x##h` made the literal, which the kernel file's text did not spell
    from porter.emulate.build import build_source
    lib = build_source(HEADER_LITERAL, tmp_path / "p.metal", fixture_root)
    x = torch.tensor([1.0, -3.0], dtype=torch.float16)
    assert run_registration(client, lib, lib.find("above", "half")[0], [x]).tolist() == [1.0, -3.0]
