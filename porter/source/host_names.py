"""The kernel name a host call passes, where the compiler knows it before the program runs.

A host function names its Metal kernel with a string: a literal (`"heaviside"`, adjacent
literals, escapes: cpp_scan.literal_value), and in two more forms whose value is fixed at
compile time (review 19's H24, H25, "not proven" where a Mac runs the named kernel):
- a concatenation of literals through `std::string` (`std::string("heavi") + "side"`);
- a name declared constant once in the function before the call (`constexpr auto name =
  "heaviside";`, `const std::string name{"heaviside"};`), whose initializer is either of the
  above. A name that is not constant (`const char* name`, a pointer that may be pointed
  elsewhere), declared more than once, declared outside the function (C++'s name lookup
  decides which one the call names) or also a macro of the file is not read.
Anything else (a helper's return value, a name chosen by a condition) is None: not proven.
"""

from __future__ import annotations

import re

from porter.source.cpp_scan import literal_value, split_top_level

_IDENT = re.compile(r"[A-Za-z_]\w*")
_STRING_CALL = re.compile(r"(?:std::)?string\s*[({](?P<inner>.*)[)}]", re.S)
_TYPE_WORDS = re.compile(r"\b(?:auto|char|string|string_view)\b")


def constant_string(expr: str, text: str, body_start: int, call_start: int, depth: int = 0) -> str | None:
    """The string `expr` (a call's argument) denotes at compile time, or None. `text`: the
    file as the compiler reads it (comments and dropped code blanked, literals kept), with the
    function's body from `body_start` and the call at `call_start`."""
    expr = expr.strip()
    value = literal_value(expr)
    if value is not None:
        return value
    joined = _concatenation(expr)
    if joined is not None:
        return joined
    if depth == 0 and _IDENT.fullmatch(expr):
        initializer = _constant_initializer(expr, text, body_start, call_start)
        if initializer is not None:
            return constant_string(initializer, text, body_start, call_start, depth + 1)
    return None


def _concatenation(expr: str) -> str | None:
    """`std::string("a") + "b" + ...`: one of the first two terms a std::string (two bare
    literals do not add in C++; a Mac's build rejects them, as porter's parse does)."""
    terms = split_top_level(expr, "+")
    if len(terms) < 2:
        return None
    values, wrapped = [], []
    for term in terms:
        call = _STRING_CALL.fullmatch(term)
        value = literal_value(call.group("inner") if call else term)
        if value is None:
            return None
        values.append(value)
        wrapped.append(call is not None)
    return "".join(values) if wrapped[0] or wrapped[1] else None


def _constant_initializer(name: str, text: str, body_start: int, call_start: int) -> str | None:
    """The initializer of `name`'s one constant declaration in the function's body before the
    call, in a block still open at the call; None where there is none, more than one, it is
    not constant, or the file defines `name` as a macro (the preprocessor's `name` is what the
    call passes: review 20's K03). A declaration outside the function is not read: which one
    a call names is C++'s name lookup (namespaces, headers: review 20's K01)."""
    if re.search(r"^\s*#\s*(?:define|undef)\s+" + re.escape(name) + r"\b", text, re.M):
        return None
    pattern = re.compile(r"(?P<type>[^;{}()]*?)\b" + re.escape(name) +
                         r"\s*(?:\[\s*\d*\s*\])?\s*(?:=\s*(?P<eq>[^;]*?)|[({](?P<init>[^;]*)[)}])\s*;", re.S)
    body = text[body_start:call_start]
    found = [m for m in pattern.finditer(body) if _TYPE_WORDS.search(m.group("type"))]
    if len(found) != 1:
        return None
    m = found[0]
    after = body[m.end():]
    if after.count("}") > after.count("{"):
        return None             # its block closed before the call: the call names another
    return (m.group("eq") if m.group("eq") is not None else m.group("init")) \
        if _constant(m.group("type")) else None


def _constant(declared: str) -> bool:
    """Whether a declaration's type (the words before the name) makes it constant: constexpr;
    or const, and where it is a pointer, the pointer itself (`const char* const`)."""
    words = " ".join(declared.replace("*", " * ").split())
    if re.search(r"\bconstexpr\b", words):
        return True
    if "*" in words:
        return words.endswith("* const")
    return re.search(r"\bconst\b", words) is not None
