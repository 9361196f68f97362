"""A kernel file's build in pieces: one object per functor (its registrations' code), linked
into the file's library, each cached by a hash of what it depends on, so that an edit of one
functor rebuilds that functor's object alone (issue 26: the edit-to-verdict loop).

Every piece compiles the whole file (a syntax error anywhere fails each of them: the whole
file is checked by every build), and instantiates only its own registrations: the prelude's
`PORTER_SELECT(NAME)` (set by the per-build header) emits a registration's entry, and so
instantiates its functor, only for the names of the piece.

A piece's key is the file with the struct of every functor it does not use blanked out: the
functor's own text, the functors it names (`log_functor{}(x)`), everything outside a functor
(helpers, macros, registrations, includes) and the functors that outside code names (compiled
into every piece). An edit of another functor leaves it alone;
an edit outside every functor rebuilds every piece. Registrations whose functor is not a
column-0 `struct NAME_functor` (a functor made by a macro) form one more piece, "the rest".

The key reads the names the text spells, so a file has pieces only where that is all a functor
can reach (`sealed`): as the preprocessor leaves the file, each struct names the functors its
text does (a macro's expansion, a name pasted with `##`, may name another: review 47's F1), the
code outside every struct names those outside code spells, and no struct holds what code
elsewhere reaches by a name of its own (a friend function, a macro, a type declared in passing:
review 47's F2, 48's F4) or what changes the macros later text sees (`_Pragma`: 48's F2).
"""

from __future__ import annotations

import re
from typing import NamedTuple

_FUNCTOR = re.compile(r"^struct (\w+)_functor\b[^;\n]*$")
REST = ""


# At most this many pieces of functors (plus the rest): each piece compiles the whole file's
# text, so a first build costs one parse per piece; an edit rebuilds one piece, its functors'
# code and one parse (porter/emulate/README: measured in bench/bench_loop.py).
MAX_PIECES = 8


class Expansion(NamedTuple):
    """A kernel file as the preprocessor leaves it (porter.emulate.frontend.expansion): each
    functor struct's lines, the lines outside every struct but registrations, and the
    registrations (each a line naming a kernel, `[[host_name(..)]]`)."""
    functors: dict
    outside: str
    registrations: tuple = ()


# what declares a type: in a struct's text other than its own head (an elaborated
# `struct tag` there declares a namespace-scope class another struct's lookup finds: review
# 48's F4), or on a registration's line (a functor made there: F1); `class` as a template
# parameter's keyword aside
_DECLARES_TYPE = re.compile(r"\b(?:struct|union|enum)\b|(?<![<,])(?<![<,]\s)\bclass\b")
_CONDITIONAL = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")


def _balanced(lines: list[str]) -> bool:
    """Whether the conditional directives of a struct's lines open and close within them: an
    `#if` the struct opens and the code after it closes chooses that code by the struct's text
    (review 49's F1), an `#else` of an `#if` before it chooses the struct by the outside's."""
    depth = 0
    for line in lines:
        m = _CONDITIONAL.match(line)
        if m is None:
            continue
        word = m.group(1)
        if word.startswith("if"):
            depth += 1
        elif depth == 0:
            return False
        elif word == "endif":
            depth -= 1
    return depth == 0


_TYPE_WORDS = ("struct", "union", "enum", "class")


def _declares_type(code: str) -> bool:
    # the words looked for first: a registration's expansion is tens of kilobytes a line, and
    # the expression's look-behinds took 0.3 s a file
    return any(word in code for word in _TYPE_WORDS) and _DECLARES_TYPE.search(code) is not None

# what changes the macros or the counter later text sees (`_Pragma("pop_macro(..)")`: F2)
_STATEFUL = re.compile(r"\b_Pragma\b|^\s*#\s*pragma\b|\b__COUNTER__\b", re.M)


# a directive but a conditional one: `#if`/`#ifdef`/`#else`... choose among the struct's own
# lines, by macros its key holds; any other (`#define`, `#undef`, `#include`, `#line`) can
# change what other structs' text means
_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)(?![ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b)")
_FRIEND = re.compile(r"\bfriend\b")


def sealed(text: str, expansion: Expansion | None) -> bool:
    """Whether each functor struct reaches another struct's text only by spelling its name, the
    one thing a piece's key reads: each struct's conditionals open and close within it, and it
    holds no other directive, no friend, no pragma and no type but its own (a macro, a friend
    function, a class others reach by a name of their own); no registration declares a type;
    no `__COUNTER__`; and the preprocessed text names no functor the written text does not
    (transitively). False where the expansion is unknown (a file that does not preprocess):
    such a file is built and walked whole."""
    spans = functor_spans(text)
    if expansion is None or set(expansion.functors) != set(spans):
        return False
    lines = text.split("\n")
    written = {n: "\n".join(lines[a:b + 1]) for n, (a, b) in spans.items()}
    if "__COUNTER__" in text:
        return False
    for name, (a, b) in spans.items():
        expanded = expansion.functors[name]
        if not _balanced(lines[a:b + 1]) or any(_DIRECTIVE.match(ln) for ln in lines[a:b + 1]) or \
                _FRIEND.search(written[name]) or _FRIEND.search(expanded) or \
                _STATEFUL.search(written[name]) or _STATEFUL.search(expanded):
            return False
        head = re.search(rf"\bstruct\s+{name}_functor\b", expanded)
        if head is None or _declares_type(expanded[:head.start()] + expanded[head.end():]):
            return False
    # a registration declares no type: a functor made on its line (from another one) is in no
    # struct's key (F1)
    if any(_declares_type(line) for line in expansion.registrations):
        return False
    for name in spans:
        if _closure(name, expansion.functors) != _closure(name, written):
            return False
    outside = re.sub(r"^struct \w+_functor;$", "", _masked(lines, spans, set()), flags=re.M)
    spelled = _named(outside, spans, written)
    return _named(expansion.outside, spans, expansion.functors) <= spelled


def _named(code: str, spans, bodies: dict[str, str]) -> set[str]:
    """The functors `code` names, and those they name, transitively."""
    named = set(re.findall(r"\b(\w+)_functor\b", code)) & set(spans)
    return set().union(*(_closure(n, bodies) for n in named)) if named else set()


class Piece(NamedTuple):     # a NamedTuple: editing commands avoid dataclasses' import
    names: tuple[str, ...]  # the registered names of its functors; (REST,) for the rest
    key_text: str           # what its object depends on, besides the headers and flags
    # the functor structs key_text keeps (the others are blanked): what the piece's cached
    # result may say of a functor stands only for these
    covers: frozenset = frozenset()

    @property
    def name(self) -> str:
        return "+".join(self.names) or "(rest)"


def functor_spans(text: str) -> dict[str, tuple[int, int]]:
    """name -> (first, last) 0-based line of each column-0 `struct NAME_functor {...};`."""
    lines = text.split("\n")
    spans: dict[str, tuple[int, int]] = {}
    i = 0
    while i < len(lines):
        m = _FUNCTOR.match(lines[i])
        if m:
            for j in range(i, len(lines)):
                if lines[j].startswith("}"):
                    if re.sub(r"//.*", "", lines[j]).strip() != "};":
                        # code after the struct on its closing line would be blanked with it
                        # out of every other piece's key: the whole file is built
                        return {}
                    if m.group(1) not in spans:
                        spans[m.group(1)] = (i, j)
                    i = j
                    break
            else:
                return {}          # an unclosed struct: no pieces, the whole file is built
        i += 1
    return spans


def pieces(text: str, expansion: Expansion | None) -> list[Piece]:
    """The file's pieces, in file order, the rest last; [] when the file has no functor struct
    or is not `sealed` (its `expansion`: the file as the preprocessor leaves it). Consecutive
    functors share a piece (at most MAX_PIECES of them): an edit of one functor's body leaves
    every piece but its own as it was."""
    return split(text) if sealed(text, expansion) else []


def split(text: str) -> list[Piece]:
    """`pieces` of a file taken to be `sealed` (porter.emulate.build starts compiling before
    the check has its expansion, and uses no piece before it passes)."""
    spans = functor_spans(text)
    if not spans:
        return []
    lines = text.split("\n")
    bodies = {name: "\n".join(lines[a:b + 1]) for name, (a, b) in spans.items()}
    names = list(spans)
    size = -(-len(names) // MAX_PIECES)
    # the functors the code outside every struct names (a hand-written kernel template calling
    # `glu_functor{}(..)`, a macro's functor): that code is compiled into every piece, and with
    # it an inline copy of each such functor, so each is in every piece's key. Otherwise an
    # edit of one leaves the other pieces' stale copies in the library, and the linker may keep
    # one of them: the old code runs, green.
    outside = re.sub(r"^struct \w+_functor;$", "", _masked(lines, spans, set()), flags=re.M)
    everywhere = _named(outside, spans, bodies)
    out = []
    for k in range(0, len(names), size):
        chunk = tuple(names[k:k + size])
        keep = set().union(everywhere, *(_closure(n, bodies) for n in chunk))
        out.append(Piece(chunk, _masked(lines, spans, keep), frozenset(keep)))
    out.append(Piece((REST,), _masked(lines, spans, everywhere), frozenset(everywhere)))
    return out


# An explicit instantiation of a hand-written kernel template, as Metal spells it (`template
# [[host_name("lerp_tensor_dense_float")]] kernel void lerp_tensor_dense<float>(...);`, often
# inside a macro of the file): the emulator runs registrations, never these kernels.
_KERNEL_INSTANTIATION = re.compile(
    r"(\bextern(?:\s|\\\n)+)?\btemplate(\s*\[\[\s*host_name\s*\([^\]]*\)\s*\]\]\s*kernel\b)")


def piece_text(text: str, names) -> str:
    """The text a piece compiles: the file, with the explicit instantiations of its hand-written
    kernel templates made declarations (`extern template`) in every piece but the rest's. Each
    piece compiled and emitted every such kernel (upstream's INSTANTIATE_LERP: a third of a
    one-functor edit's compile); the rest's piece still instantiates them all, so an error in
    one fails the build as the whole file's did. Lines are kept."""
    if REST in names:
        return text
    # a kernel's alone (a hand-written helper template a functor calls is compiled in its
    # piece, as before), and one already a declaration is left as it is
    return _KERNEL_INSTANTIATION.sub(
        lambda m: m.group(0) if m.group(1) else f"extern template{m.group(2)}", text)


def functors_used(text: str, name: str) -> set[str]:
    """The functor structs the registered `name`'s kernels run: its own and those its body
    names, transitively (set() where `name` has no functor struct)."""
    spans = functor_spans(text)
    if name not in spans:
        return set()
    lines = text.split("\n")
    return _closure(name, {n: "\n".join(lines[a:b + 1]) for n, (a, b) in spans.items()})


def _closure(name: str, bodies: dict[str, str]) -> set[str]:
    """`name` and every functor its struct names, transitively."""
    keep, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in keep:
            continue
        keep.add(n)
        todo += [m for m in re.findall(r"\b(\w+)_functor\b", bodies[n]) if m in bodies]
    return keep


def _masked(lines: list[str], spans: dict[str, tuple[int, int]], keep: set[str]) -> str:
    out = list(lines)
    for name, (a, b) in spans.items():
        if name not in keep:
            out[a] = f"struct {name}_functor;"
            for k in range(a + 1, b + 1):
                out[k] = ""
    return "\n".join(out)


def select_header(names: list[str], all_functors: list[str], skip: list[str]) -> str:
    """The per-build header (porter_skip.h) of a build of the functors named (REST: the
    registrations of no functor struct): their registrations emitted, every other one left
    out; `skip` ("name|dtype" keys) quarantined as ever."""
    import json

    lines = ["#pragma once", "#undef PORTER_SELECT"]
    named = [n for n in names if n != REST]
    if REST in names:
        # the rest: every name but the other pieces' functors
        others = [n for n in all_functors if n not in named]
        lines += [f"#define PORTER_GROUP_{n} PORTER_PROBE" for n in others]
        lines.append("#define PORTER_SELECT(NAME) PORTER_NOT(PORTER_IN_GROUP(NAME))")
    else:
        lines += [f"#define PORTER_GROUP_{n} PORTER_PROBE" for n in named]
        lines.append("#define PORTER_SELECT(NAME) PORTER_IN_GROUP(NAME)")
    items = "".join(f"{json.dumps(k)}, " for k in skip)
    lines += ["namespace porter {",
              f"constexpr const char* skip_list[] = {{{items}nullptr}};",
              "constexpr bool skipped(const char* name, const char* dtype) {",
              "  for (const char* key : skip_list) {",
              "    if (key && key_eq(key, name, dtype)) return true;",
              "  }",
              "  return false;",
              "}",
              "} // namespace porter", ""]
    return "\n".join(lines)
