"""A checkout's string-to-enum functions: what `get_gelutype_enum("tanh")` returns, read from
the function's own `if (approximate == "none") { return GeluType::None; } else if ...` chain in
`native/*.h`, so that the emulator maps a sample's `str` argument the way the checkout does
(a value no branch names raises, as the function's TORCH_CHECK does)."""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import line_of, matching_close

STRING_PARAM = r"(?:const\s+)?(?:std::|c10::)?(?:string_view|string)\s*&?\s*(\w+)"
BRANCH_RE = r'\bif\s*\(\s*{p}\s*==\s*"(\w*)"\s*\)\s*\{{?\s*return\s+([\w:]+)\s*;'


class StringEnum(NamedTuple):
    """`function(str) -> enum`: each string it accepts and the enumerator it returns."""

    function: str                  # get_gelutype_enum
    enum: str                      # GeluType
    values: tuple[tuple[str, str], ...]    # (("none", "GeluType::None"), ("tanh", "GeluType::Tanh"))
    path: str
    line: int

    def value_of(self, text: str) -> str | None:
        """The enumerator `text` maps to, or None (the function's TORCH_CHECK raises)."""
        return dict(self.values).get(text)


def unqualified(name: str) -> str:
    """`at::native::GeluType::Tanh` -> `GeluType::Tanh`: enumerators compared as spelled last."""
    parts = [p for p in name.replace(" ", "").split("::") if p]
    return "::".join(parts[-2:])


def string_enum(checkout: co.Checkout, function: str) -> StringEnum | None:
    """The string-to-enum function `function` as a native/*.h of the checkout defines it, or None
    where none does or its body is not a chain of `if (s == "literal") return Enum::X;`."""
    head = re.compile(rf"\b([\w:]+)\s+{re.escape(function)}\s*\(\s*{STRING_PARAM}\s*\)\s*\{{")
    found = checkout.first_definition(co.NATIVE, "*.h", function, head)
    if found is None:
        return None
    rel, text, mask, m = found
    close = matching_close(mask, m.end() - 1)
    body = text[m.end():close] if close > 0 else ""
    enum, param = unqualified(m.group(1)), m.group(2)
    branches = re.findall(BRANCH_RE.format(p=re.escape(param)), body)
    values = tuple((literal, unqualified(value)) for literal, value in branches)
    if len(re.findall(r"\bif\s*\(", mask[m.end():close])) != len(values) or \
            len(re.findall(r"\breturn\b", mask[m.end():close])) != len(values):
        return None         # a branch of another shape: its mapping is not read
    if not values or any(not v.startswith(enum.split("::")[-1] + "::") for _, v in values):
        return None
    return StringEnum(function, enum.split("::")[-1], values, rel, line_of(text, m.start()))
