"""Half literals (`0.1h`) rounded once, as Metal's clang rounds them.

clang converts a floating literal straight to its type's format, correctly rounded. The shim's
`operator""h` receives the literal as a `long double` and then rounds that to half: two
roundings, which differ where the long double lands on a tie between two halves that the
decimal value is not on (`1.0004882812500000000009h` is 1 + 2^-10 on a Mac, 1.0 after the long
double: review 36's K01). So the kernel file's text given to g++ spells each half literal
whose decimal value is not a half exactly as the hexadecimal half clang makes of it, which
the long double holds exactly.
"""

from __future__ import annotations

import re
from fractions import Fraction

# a decimal floating literal with Metal's half suffix, C++14's digit separators allowed (review
# 37's N06t); not part of a name or another number
DIGITS = r"\d(?:'?\d)*"          # a literal's digits (porter.emulate.frontend's rewrites too)
_HALF_LITERAL = re.compile(
    rf"(?<![\w.'])((?:{DIGITS}\.(?:{DIGITS})?|\.{DIGITS})(?:[eE][+-]?{DIGITS})?"
    rf"|{DIGITS}[eE][+-]?{DIGITS})[hH](?!\w)")

_SEPARATOR = re.compile(r"(?<=[0-9a-fA-F])'(?=[0-9a-fA-F])")

_MANTISSA_BITS = 10
_MIN_EXPONENT = -14          # of a normal half; below it the spacing stays 2^-24
_OVERFLOW = Fraction(65520)  # halfway between the largest half (65504) and 2^16: inf from here


def nearest_half(value: Fraction) -> float:
    """The half nearest `value` (ties to even), as a float that holds it exactly; inf past
    the largest half."""
    if value < 0:
        return -nearest_half(-value)
    if value >= _OVERFLOW:
        return float("inf")
    if value == 0:
        return 0.0
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exponent > value:
        exponent -= 1                       # now 2^exponent <= value < 2^(exponent + 1)
    ulp = Fraction(2) ** (max(exponent, _MIN_EXPONENT) - _MANTISSA_BITS)
    steps, rest = divmod(value / ulp, 1)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and steps % 2 == 1):
        steps += 1
    return float(steps * ulp)


def exact_half_literals(text: str, code: str | None = None) -> str:
    """`text` with each half literal in code (`code`: porter.source.cpp_scan.code_mask's
    view of it, comments and strings blanked) that is not a half exactly spelled as the
    hexadecimal half it rounds to."""
    if "h" not in text and "H" not in text:
        return text
    if code is None or "'" in text:
        from porter.source.cpp_scan import code_mask
        # a digit separator read as a digit: the mask takes it for a character literal's quote
        code = code_mask(_SEPARATOR.sub("0", text))
    out, at = [], 0
    for m in _HALF_LITERAL.finditer(text):
        if code[m.start()] != text[m.start()]:
            continue                        # in a comment or a string
        value = Fraction(m.group(1).replace("'", ""))
        half = nearest_half(value)
        if half == value:
            continue                        # exact: both roundings agree
        out.append(text[at:m.start()])
        out.append("__builtin_inff16()" if half == float("inf") else f"{half.hex()}h")
        at = m.end()
    if not out:
        return text
    out.append(text[at:])
    return "".join(out)
