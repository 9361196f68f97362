"""The kernel file's program-scope `constant` arrays, as the g++ build writes them: each behind
a guard page (porter/emulate/worker_runtime.c), so that a read past its end is seen.

On this CPU a pointer stepped past a `constant` table reads the next object's bytes, and the
sample's verdict was whatever those bytes made of it (review 36's K07: `constant int* p = tab;
p[2]` of a two-element table; review 37's N29: `p += 1 + k`). On an Apple GPU the read is
undefined. So `constant T name[N] = {...};` at namespace scope is built as

    constant T porter_init_name[N] = {...}; static const auto& name = ::porter::guarded(porter_init_name);

on the same line: the worker copies each array to the end of pages an inaccessible page
follows, and a read past it is the kernel's OUT_OF_BOUNDS note (not proven). Only what this
module can read as such a declaration is guarded, `constexpr` ones included (a constant
expression that reads such an array's element then fails the g++ build, and the kernels are
not proven: review 40's U05 was green), and a class's `static` member array (V02, V02t); one a
macro spells, one in a header, or one declared beside a scalar keeps its place, and a read past
it is this CPU's bytes.
"""

from __future__ import annotations

import re

from porter.source.cpp_scan import matching_close

PREFIX = "porter_init_"

# one declaration at namespace scope, comments blanked: qualifiers with `constant` among them,
# the element type, the name, its dimensions and a braced initializer
_DECLARATION = re.compile(
    r"\s*(?P<head>(?:[\w:<>,]+\s+)+?)(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\]]*\]\s*)+)"
    r"=\s*\{", re.S)


def guarded(text: str) -> str:
    """`text` with each program-scope `constant` array it declares built behind a guard page (the
    module's docstring); the line structure is kept."""
    edits: list[tuple[int, str]] = []
    blank = _blanked(text)
    for start, end, in_class in _namespace_statements(blank):
        statement = blank[start:end]
        m = _DECLARATION.match(statement)
        if m is None:
            continue
        words = m.group("head").split()
        if "constant" not in words or {"typedef", "using", "extern"} & set(words):
            continue
        if in_class and "static" not in words:
            continue                               # a member of each object: no program scope
        names = _declarators(statement, m.start("name"))   # braces of the code alone
        if names is None:
            continue                               # not arrays with braced initializers alone
        for at in names:
            edits.append((start + at, PREFIX))
        name_of = [re.match(r"\w+", statement[at:]).group(0) for at in names]
        # a class's static member is an inline one (C++17), as its constexpr array is
        storage = "static inline" if in_class else "static"
        edits.append((end, "".join(f" {storage} const auto& {name} = ::porter::guarded({PREFIX}{name});"
                                   for name in name_of)))
    if not edits:
        return text
    out, at = [], 0
    for pos, piece in sorted(edits):
        out += [text[at:pos], piece]
        at = pos
    return "".join(out) + text[at:]


# one declarator after the first: `, name[dims] = {`
_NEXT_DECLARATOR = re.compile(r",\s*([A-Za-z_]\w*)\s*(?:\[[^\[\]]*\]\s*)+=\s*\{")


def _declarators(statement: str, first: int) -> list[int] | None:
    """Where each declarator's name starts, from the first at `first`, where every declarator
    is an array with a braced initializer (`a[2] = {1, 2}, b[2] = {3, 4};`); else None."""
    names = [first]
    brace = statement.index("{", first)
    while True:
        close = matching_close(statement, brace)
        if close < 0:
            return None
        rest = statement[close + 1:]
        if rest.strip() == ";":
            return names
        m = _NEXT_DECLARATOR.match(rest)
        if m is None:
            return None
        names.append(close + 1 + m.start(1))
        brace = close + m.end()


def _namespace_statements(blank: str):
    """(start, end, in_class) of each statement at namespace scope, or directly in a class
    there: `end` just past its `;`, in `blank` (the text with comments, literals and preprocessor
    lines blanked: _blanked). A brace a `namespace` (or `extern "C"`) opens is namespace scope, one a `struct`, `class` or
    `union` head opens a class's, any other is inside a statement."""
    stack: list[str] = []           # NAMESPACE, CLASS or OTHER, per open brace
    start = 0
    i, n = 0, len(blank)
    while i < n:
        c = blank[i]
        if c == "{":
            head = blank[start:i]
            kind = (NAMESPACE if re.search(r"(?:\bnamespace(?:\s+[\w:]+)?|\bextern\s+\"C\")\s*$", head)
                    else CLASS if re.search(r"\b(?:struct|class|union)\s+\w+[^;{}()=]*$", head)
                    else OTHER)
            if kind != OTHER and _declarative(stack):
                start = i + 1
            stack.append(kind)
        elif c == "}":
            if stack:
                was = stack.pop()
                if _declarative(stack) and (was != OTHER or not _continues(blank, i + 1)):
                    start = i + 1       # a namespace's or a class's end, or a function body's
        elif c == ";" and _declarative(stack):
            yield start, i + 1, bool(stack) and stack[-1] == CLASS
            start = i + 1
        i += 1


NAMESPACE, CLASS, OTHER = "namespace", "class", "other"


def _declarative(stack: list[str]) -> bool:
    """Whether the braces open are namespaces' and classes' alone: a statement there declares."""
    return all(kind != OTHER for kind in stack)


def _continues(blank: str, i: int) -> bool:
    """Whether the statement goes on after a `}` (an initializer's: `= {...};`)."""
    rest = blank[i:].lstrip()
    return rest[:1] in (";", ",", ")")


def _blanked(text: str) -> str:
    """`text` with comments, string and character literals and preprocessor lines turned into
    spaces (newlines kept), so that braces and semicolons are the code's."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        if c == "'" and i > 0 and text[i - 1].isalnum():
            i += 1                      # a digit separator (1'000), not a character literal
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                if out[k] != "\n":
                    out[k] = " "
            i = j + 1
            continue
        i += 1
    return "".join(out)
