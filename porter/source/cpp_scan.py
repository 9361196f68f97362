"""Small lexical helpers for C++, Objective-C++ and Metal sources.

porter locates things in these files by tokens and anchors. The one rule that matters
everywhere: braces and parentheses inside string literals, character literals and comments
do not count.
"""

from __future__ import annotations

import re
from functools import cached_property


LEXEMES_RE = re.compile(
    # a line comment, continued by a backslash at a line's end: the compiler splices lines
    # before it reads comments (review 26's C1, M7: the next line was read as code)
    r'//(?:\\\r?\n|[^\n])*'
    r'|/\*.*?(?:\*/|\Z)'                 # block comment
    r'|(?<![\w])R"(?P<delim>[^(\s"]*)\(.*?\)(?P=delim)"'   # raw string
    r'|"(?:\\.|[^"\\\n])*"?'             # string literal
    r"|'(?:\\.|[^'\\\n])*'?",            # char literal
    re.S)
NOT_NEWLINE_RE = re.compile(r"[^\n]")


def code_mask(text: str) -> str:
    """`text` with the contents of comments, strings and char literals replaced by spaces.

    Offsets and newlines are kept, so a match in the mask is a match in the text. String
    and char literals keep their quotes, so `"}"` still reads as a string, not a brace.
    """
    def blank(m: re.Match) -> str:
        lexeme = m.group()
        if lexeme[0] in "\"'R" and lexeme[-1] == lexeme[0] and len(lexeme) > 1:
            return lexeme[0] + _spaces(lexeme[1:-1]) + lexeme[-1]
        return _spaces(lexeme)

    return LEXEMES_RE.sub(blank, text)


# opener -> its own kind of bracket, both ways: the scan hops from bracket to bracket
BRACKETS_RE = {"(": re.compile(r"[()]"), "{": re.compile(r"[{}]"), "[": re.compile(r"[\[\]]")}


def _spaces(text: str) -> str:
    # most lexemes are one line: a run of spaces, without a regex pass
    return NOT_NEWLINE_RE.sub(" ", text) if "\n" in text else " " * len(text)


def matching_close(mask: str, open_at: int) -> int:
    """Offset of the bracket closing the one at `open_at` in a code mask, or -1."""
    opener = mask[open_at]
    depth = 0
    for m in BRACKETS_RE[opener].finditer(mask, open_at):
        if m.group() == opener:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    return -1


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), <>, [] and {}, and outside string literals (a `,` or `(` in
    one is no separator or bracket)."""
    parts, depth, start, k = [], 0, 0, 0
    while k < len(text):
        ch = text[k]
        if ch == '"' and not (k and text[k - 1] == "'"):      # not the character '"'
            literal = _RAW_RE.match(text, k - 1) if k and text[k - 1] == "R" else None
            literal = literal or _PLAIN_RE.match(text, k)
            if literal:
                k = literal.end()
                continue
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:k])
            start = k + 1
        k += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def line_of(text: str, offset: int) -> int:
    """1-based line number of `offset`."""
    return text.count("\n", 0, offset) + 1


class LineNumbers:
    """`line_of` for many offsets into one large text, mostly in increasing order: each call
    counts only the newlines since the previous offset (a scan of a 1.3 MB file from its start
    per offset is what it replaces)."""

    def __init__(self, text: str):
        self.text, self._offset, self._line = text, 0, 1

    def of(self, offset: int) -> int:
        if offset < self._offset:
            self._offset, self._line = 0, 1
        self._line += self.text.count("\n", self._offset, offset)
        self._offset = offset
        return self._line


def line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def line_end(text: str, offset: int) -> int:
    """Offset just past the newline of the line holding `offset`."""
    j = text.find("\n", offset)
    return len(text) if j < 0 else j + 1


def in_define(mask: str, offset: int) -> bool:
    """Whether `offset` lies in a `#define` (its first line or a `\\`-continued one)."""
    start = mask.rfind("\n", 0, offset) + 1
    while True:
        end = mask.find("\n", start)
        if mask[start:end if end >= 0 else len(mask)].lstrip().startswith("#"):
            return True
        if start == 0:
            return False
        prev_start = mask.rfind("\n", 0, start - 1) + 1
        if not mask[prev_start:start - 1].rstrip().endswith("\\"):
            return False
        start = prev_start


class SourceFile:
    """A C++/Objective-C++/Metal source text and its code mask, computed once."""

    def __init__(self, text: str, path: str = ""):
        self.text = text
        self.path = path

    @cached_property
    def mask(self) -> str:
        return code_mask(self.text)

    def in_define(self, offset: int) -> bool:
        return in_define(self.mask, offset)


PP_LINE_RE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$", re.M)
_CONSTANT_CONDITIONS = {"0": False, "false": False, "1": True, "true": True,
                        "!0": True, "!1": False, "!false": True, "!true": False}


def undecided_spans(mask: str) -> list[tuple[int, int, str]]:
    """(start, end, condition) of the code under a preprocessor condition porter cannot decide
    (`#ifdef X`, `#if FLAG`, an `#elif` of either): whether the compiler sees it depends on
    what the build defines, so what it registers is not proven."""
    spans, stack = [], []      # stack: [condition or "" when decided, start]
    for m in PP_LINE_RE.finditer(mask):
        word, rest = m.group(1), " ".join(m.group(2).split(" //")[0].split())
        value = _CONSTANT_CONDITIONS.get(rest) if word in ("if", "elif") else None
        if word in ("if", "ifdef", "ifndef"):
            stack.append(["" if value is not None else f"#{word} {rest}", m.end()])
            continue
        if not stack:
            continue
        frame = stack[-1]
        if word == "endif":
            if frame[0]:
                spans.append((frame[1], m.start(), frame[0]))
            stack.pop()
        elif word == "elif" and value is None and not frame[0]:
            frame[0], frame[1] = f"#elif {rest}", m.end()
    return spans


def blank_inactive(mask: str) -> str:
    """`mask` with the code the preprocessor never compiles blanked (offsets kept): the body of
    `#if 0` (or false), the `#else`/`#elif` parts after a branch that is always taken (`#if 1`).
    A condition porter cannot decide (`#ifdef X`) leaves every branch as it is."""
    return blank_spans(mask, inactive_spans(mask))


def comments_blanked(text: str) -> str:
    """`text` with comments replaced by spaces and string literals kept (offsets kept): the code
    as the compiler reads it, with the names a call passes still legible."""
    return LEXEMES_RE.sub(lambda m: _spaces(m.group()) if m.group().startswith("/") else m.group(),
                          text)


def code_changed(then: str | None, now: str | None) -> bool:
    """Whether two texts of a file differ beyond comments and blank space (review 25's H9: a
    comment added to a header is no change a build sees); None: no such file."""
    if then is None or now is None:
        return then != now
    return comments_blanked(then).split() != comments_blanked(now).split()


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with every (start, end) span blanked, newlines kept."""
    if not spans:
        return text
    out = list(text)
    for start, end in spans:
        for i in range(start, end):
            if out[i] != "\n":
                out[i] = " "
    return "".join(out)


def inactive_spans(mask: str) -> list[tuple[int, int]]:
    """(start, end) of the code the preprocessor never compiles (see `blank_inactive`)."""
    spans, stack = [], []      # stack: [decided (None = unknown), taken, start of dead code]
    for m in PP_LINE_RE.finditer(mask):
        word, rest = m.group(1), " ".join(m.group(2).split())
        value = _CONSTANT_CONDITIONS.get(rest.split("//")[0].strip()) if word in ("if", "elif") else None
        if word in ("if", "ifdef", "ifndef"):
            dead = value is False
            stack.append([value is not None, bool(value), m.end() if dead else None])
            continue
        if not stack:
            continue
        frame = stack[-1]
        if frame[2] is not None:          # a dead branch ends here
            spans.append((frame[2], m.start()))
            frame[2] = None
        if word == "endif":
            stack.pop()
        elif frame[0]:                    # the chain so far was decided
            if frame[1]:                  # a branch was taken: the rest is dead
                frame[2] = m.end()
            elif word == "else" or value is True:
                frame[1] = True
            elif value is False:
                frame[2] = m.end()
            else:
                frame[0] = False          # an undecidable #elif: leave the rest alone
    return spans


# A C++ string literal: raw (`R"d(...)d"`) or ordinary, with its escapes. A prefixed one (u8,
# L, u, U) is another character type, which a kernel name (`const char*`) is not. Line splices
# are removed before literals are read, except inside a raw literal, which keeps them (C++
# [lex.pptoken]: review 17's C02).
_RAW_RE = re.compile(r'R"(?P<delim>[^()\\\s]{0,16})\((?P<raw>.*?)\)(?P=delim)"', re.S)
_PLAIN_RE = re.compile(r'"(?P<plain>(?:[^"\\\n]|\\\n|\\.)*)"', re.S)
_ESCAPE_RE = re.compile(r"\\(?:x(?P<hex>[0-9A-Fa-f]+)|u(?P<u4>[0-9A-Fa-f]{4})|U(?P<u8>[0-9A-Fa-f]{8})"
                        r"|(?P<oct>[0-7]{1,3})|(?P<simple>.))", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
                   "v": "\v", "\\": "\\", '"': '"', "'": "'", "?": "?"}


def literal_value(text: str) -> str | None:
    """The string `text` denotes when it is string literals alone, as the compiler reads them
    (adjacent literals joined, escapes decoded, line splices removed outside raw literals),
    else None."""
    pieces, at = [], 0
    while True:
        while at < len(text) and (text[at].isspace() or text.startswith("\\\n", at)):
            at += 2 if text.startswith("\\\n", at) else 1
        if at == len(text):
            return "".join(pieces) if pieces else None
        raw = _RAW_RE.match(text, at)
        plain = None if raw else _PLAIN_RE.match(text, at)
        if raw:
            pieces.append(raw.group("raw"))
            at = raw.end()
        elif plain:
            pieces.append(_ESCAPE_RE.sub(_escaped, plain.group("plain").replace("\\\n", "")))
            at = plain.end()
        else:
            return None


def _escaped(m: re.Match) -> str:
    if m.group("hex"):
        return chr(int(m.group("hex"), 16))
    if m.group("u4") or m.group("u8"):
        return chr(int(m.group("u4") or m.group("u8"), 16))
    if m.group("oct"):
        return chr(int(m.group("oct"), 8))
    return _SIMPLE_ESCAPES.get(m.group("simple"), "\ufffd")
