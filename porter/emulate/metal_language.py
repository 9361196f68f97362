"""What Metal's compiler rejects that g++ accepts: a token pass over the kernel file's own code
and the checkout's headers it includes (c10/metal/*.h, kernels/*.h), as the preprocessor leaves
them (the compiler's own view: comments gone, macros expanded, `#if` branches of the version
being built chosen, `__METAL__` defined, so a header's host-only branch is not looked at).

The shim (porter/emulate/include) is C++ and uses the C++ library: it stands in for Metal's own
library and is not looked at. A Mac's Metal compiler has no
`double`, no `long long`, no C++ standard library (`std::`, `#include <vector>`), no `goto`,
no dynamic allocation (`new`/`delete`), no exceptions, no `thread_local`, no `virtual`, no
RTTI, no function pointers, no recursion, and no `static` local or namespace-scope variable
outside the `constant` address space, and no variable-length array; each is a build error
of the file at its line.
Recursion and function pointers are found where the tokens show them: a function of the
file, not a template, calling itself by name with as many arguments as it takes (no other
overload of that arity in the file), a declarator `(*name)(...)` that is not a parameter.
Templates and parameters are let be because upstream's own headers build with them on a Mac:
c10/metal/special_math.h's bessel_j1_forward (a template) calls itself, c10/metal/atomic.h takes
its operation as `T (*op)(T, T)`.
"""

from __future__ import annotations

import re
from pathlib import Path

# `# 12 "file" 1 3`: the preprocessor's line markers (flag 1: entering an included file)
_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d)*)\s*$')
_TOKEN = re.compile(r"""
    (?P<str>(?:u8|u|U|L)?"(?:[^"\\]|\\.)*") |
    (?P<chr>(?:u8|u|U|L)?'(?:[^'\\]|\\.)*') |
    (?P<num>\.?\d(?:[\w.]|[eEpP][+-])*) |
    (?P<id>[A-Za-z_]\w*) |
    (?P<punct>::|->|\+\+|--|<<=|>>=|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=]=?|[()\[\]{};,.?:#])
""", re.X)

# one message per forbidden keyword: what Metal lacks, and what to write instead
KEYWORDS = {
    "double": "Metal has no `double` (use float)",
    "goto": "Metal has no `goto`",
    "new": "Metal has no dynamic allocation (`new`)",
    "try": "Metal has no exceptions (`try`)",
    "catch": "Metal has no exceptions (`catch`)",
    "throw": "Metal has no exceptions (`throw`)",
    "thread_local": "Metal has no `thread_local`",
    "virtual": "Metal has no virtual functions (`virtual`)",
    "typeid": "Metal has no run-time type information (`typeid`)",
    "dynamic_cast": "Metal has no run-time type information (`dynamic_cast`)",
}
LONG_LONG = "Metal has no `long long` (Metal's `long` is 64 bits)"
STD = "Metal has no C++ standard library (`std::`; Metal's is `metal::`, <metal_stdlib>)"
DELETE = "Metal has no dynamic allocation (`delete`)"
FUNCTION_POINTER = "Metal has no function pointers"
STATIC_LOCAL = ("Metal has no static local variable outside the `constant` address space "
                "(`constant T name = ...;`, or a plain local)")
VLA = ("Metal has no variable-length array (an array's size must be a constant expression: a "
       "parameter or a non-const local is not one)")
PROGRAM_SCOPE = ("Metal has no program-scope variable outside the `constant` address space "
                 "(`constant T name = ...;`)")
RECURSION = "Metal has no recursion ({name} calls itself)"
# Metal 4.0 is C++17; Metal 3.x is C++14, without `if constexpr` (c10/metal/common.h's
# IF_CONSTEXPR is `constexpr` from 4.0 on, nothing before)
CXX17_VERSION = 400
IF_CONSTEXPR = ("`if constexpr` is C++17: Metal before 4.0 is C++14 "
                "(write `if IF_CONSTEXPR (...)`, c10/metal/common.h)")
INCLUDE = ("Metal has no C++ standard library or system headers (#include <{name}>; "
           "a kernel file includes <metal_*> and the checkout's own headers)")

# identifiers that cannot end a declaration's type: `return (*p)(x)` is a call, not a declarator
_NOT_A_TYPE = frozenset("""return case else do sizeof alignof co_return co_yield throw and or
not delete new""".split())


def file_tokens(preprocessed: str, checked) -> dict[str, tuple[list[tuple[int, str]],
                                                                list[tuple[int, str]]]]:
    """Per file that `checked(name)` accepts, in the order the preprocessor enters them: its own
    code as (line, text) (tokenized by `violations`), and the files it includes directly as
    (line of the #include, resolved path)."""
    files: dict[str, tuple[list, list]] = {}
    current, line = None, 0
    own = False
    for raw in preprocessed.split("\n"):
        m = _MARKER.match(raw)
        if m:
            number, name, flags = int(m.group(1)), _unescape(m.group(2)), m.group(3).split()
            if "1" in flags and own:
                files[current][1].append((line, name))
            current, line = name, number
            own = checked(name)
            if own:
                files.setdefault(name, ([], []))
            continue
        if own and raw and not raw.startswith("#pragma"):
            files[current][0].append((line, raw))
        line += 1
    return files


def _unescape(name: str) -> str:
    return name.replace('\\"', '"').replace("\\\\", "\\")


def violations(files, allowed: list[Path], *,
               version: int = 310) -> dict[str, list[tuple[int, str]]]:
    """(line, message) for each construct a Metal compiler of `version` (__METAL_VERSION__)
    rejects, in line order, per file of `files` (file_tokens: the kernel file, the checkout's
    headers it includes); only files with findings. `allowed`: the directories whose headers
    a kernel file may include."""
    found: dict[str, list[tuple[int, str]]] = {}
    for name, (lines, includes) in files.items():
        # a header is scanned once per process for the code it has: every kernel file and
        # version that includes it unchanged gives it the same lines
        key = (hash(tuple(lines)), tuple(includes), tuple(map(str, allowed)),
               version >= CXX17_VERSION)
        errors = _SCANNED.get(key)
        if errors is None:
            tokens = [(ln, t.lastgroup, t.group()) for ln, raw in lines
                      for t in _TOKEN.finditer(raw)]
            if len(_SCANNED) > 256:     # a long-lived `--watch`: start again (clear() is
                _SCANNED.clear()        # one step for the version threads beside this one)
            errors = _SCANNED[key] = _file_violations(tokens, includes, allowed, version)
        if errors:
            found[name] = errors
    return found


_SCANNED: dict[tuple, list[tuple[int, str]]] = {}


def _file_violations(tokens, includes, allowed: list[Path], version: int) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for line, path in includes:
        if not _allowed_header(Path(path), allowed):
            found.append((line, INCLUDE.format(name=_short(Path(path)))))
    ids = [(ln, kind, text) for ln, kind, text in tokens if kind not in ("str", "chr")]
    depth = 0       # parentheses open: a declarator inside them is a parameter
    for i, (line, kind, text) in enumerate(ids):
        prev = ids[i - 1][2] if i else ""
        after = ids[i + 1][2] if i + 1 < len(ids) else ""
        depth += (text == "(") - (text == ")")
        if kind == "id" and text in KEYWORDS:
            found.append((line, KEYWORDS[text]))
        elif text == "long" and after == "long" and prev != "long":
            found.append((line, LONG_LONG))
        elif text == "std" and (after == "::" or prev == "namespace"):
            found.append((line, STD))
        elif text == "delete" and prev != "=":
            found.append((line, DELETE))
        elif text == "(" and after == "*" and depth == 1 and _function_pointer(ids, i):
            # a parameter `T (*op)(T, T)` builds (upstream's c10/metal/atomic.h passes
            # its operation so): only a variable or a type of pointer to function is refused
            found.append((line, FUNCTION_POINTER))
        elif text == "if" and after == "constexpr" and version < CXX17_VERSION:
            found.append((line, IF_CONSTEXPR))
    found += _recursion(ids)
    found += _storage(ids)
    return sorted(dict.fromkeys(found), key=lambda f: f[0])   # in line order, then column


def _allowed_header(path: Path, allowed: list[Path]) -> bool:
    from porter.emulate.headers import SHIM_DIR
    if path.parent == SHIM_DIR:
        return path.name.startswith("metal_")
    return any(_under(path, d) for d in allowed)


def _under(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False


def _short(path: Path) -> str:
    parts = path.parts
    # /usr/include/c++/12/bits/x.h -> bits/x.h: the name as it was written, near enough
    for anchor in ("c++", "include"):
        if anchor in parts:
            rest = parts[len(parts) - parts[::-1].index(anchor):]
            if anchor == "c++" and rest and rest[0][:1].isdigit():
                rest = rest[1:]
            return "/".join(rest)
    return path.name


def _function_pointer(ids, i: int) -> bool:
    """`( * name ) (` or `( * ) (` after a type: a declarator of a pointer to function."""
    j = i + 2
    if j < len(ids) and ids[j][1] == "id":
        j += 1
    if not (j + 1 < len(ids) and ids[j][2] == ")" and ids[j + 1][2] == "("):
        return False
    prev_kind, prev = (ids[i - 1][1], ids[i - 1][2]) if i else ("", "")
    return (prev_kind == "id" and prev not in _NOT_A_TYPE) or prev in (">", "*", "&")


def _recursion(ids) -> list[tuple[int, str]]:
    """Functions of the file (not templates) whose body calls them by name with their own arity,
    where the file declares no other overload of that name and arity (a call to another overload
    is not recursion). `operator()` counts through `(*this)(...)` and `operator()(...)`."""
    texts = [t for _, _, t in ids]
    scopes = _class_scopes(texts)
    defs: list[tuple[str, int, int, int]] = []      # name, arity, body start, body end
    arities: dict[tuple[str, int], int] = {}
    signatures: dict[tuple[str, int], set] = {}
    i = 0
    while i < len(texts):
        t = texts[i]
        name, open_at = None, None
        if t == "operator" and texts[i + 1:i + 4] == ["(", ")", "("]:
            # overloads of operator() are per class
            name, open_at = f"{scopes[i]}::operator()", i + 3
        elif ids[i][1] == "id" and i + 1 < len(texts) and texts[i + 1] == "(" and t not in (
                "if", "for", "while", "switch", "return", "sizeof", "decltype", "alignof",
                "operator"):
            name, open_at = t, i + 1
        if name is not None and _declares(ids, i):
            close = _matching(texts, open_at)
            if close is not None:
                j = close + 1
                while j < len(texts) and texts[j] in ("const", "noexcept", "constexpr", "thread",
                                                      "device", "constant", "threadgroup"):
                    j += 1
                if j < len(texts) and texts[j] in ("{", ";", "->"):
                    arity = _arity(texts, open_at, close)
                    # a prototype and its definition are one function: overloads are counted
                    # by their parameters' types (the text without each parameter's name)
                    signatures.setdefault((name, arity), set()).add(
                        _param_types(texts, open_at, close))
                    arities[(name, arity)] = len(signatures[(name, arity)])
                    if texts[j] == "->":     # trailing return type: the body follows it
                        while j < len(texts) and texts[j] not in ("{", ";"):
                            j += 1
                    if j < len(texts) and texts[j] == "{" and not _templated(texts, i):
                        end = _matching(texts, j, "{", "}")
                        if end is not None:
                            defs.append((name, arity, j, end))
        i += 1
    found = []
    for name, arity, start, end in defs:
        if arities.get((name, arity), 0) > 1:
            continue
        for k in range(start + 1, end):
            call_open = None
            if name.endswith("::operator()"):
                if texts[k:k + 5] == ["(", "*", "this", ")", "("]:
                    call_open = k + 4
                elif texts[k:k + 4] == ["operator", "(", ")", "("]:
                    call_open = k + 3
            elif texts[k] == name and texts[k + 1] == "(" and texts[k - 1] not in (".", "->", "::"):
                call_open = k + 1
            if call_open is None:
                continue
            close = _matching(texts, call_open)
            if close is not None and _arity(texts, call_open, close) == arity:
                found.append((ids[k][0], RECURSION.format(name=name.split("::")[-1])))
                break
    found += _call_cycles(ids, texts, [d for d in defs if arities.get(d[:2], 0) == 1])
    return found


# what may stand between a function's `)` and its body
_AFTER_PARAMS = frozenset("""const noexcept override final mutable volatile thread device
constant threadgroup""".split())
# The shim defines `constant` as `const`, and these rules read the preprocessed text: a `const`
# variable may have been written `constant` and is let be (a Mac also refuses a plain `const`
# one; that stays unseen here)
_CONST = frozenset(("const", "constant"))
# statements at namespace scope that declare no variable
_NOT_A_VARIABLE = frozenset("""template using typedef struct class union enum namespace
static_assert extern __attribute__ friend""".split())


def _storage(ids) -> list[tuple[int, str]]:
    """Variables Metal refuses: a `static` variable of a function and a variable at namespace
    scope, each unless declared in the `constant` address space (upstream writes `constexpr
    constant bool is_complex_v`; a function's lookup table is a plain local, not static), and
    a local array sized by a run-time value (a parameter, or a local declared neither `const`
    nor `constexpr`: g++ takes it as an extension). Braces are told apart by what opens them: a
    namespace, a function body (after its `)`), a class body, an initializer; class members
    (`static constexpr int arity`) are let be."""
    found: list[tuple[int, str]] = []
    # per open brace: its kind, its statement so far, the run-time names it declares
    frames: list[list] = [["ns", [], set()]]
    for line, kind, text in ids:
        here, stmt, _ = frames[-1]
        if text == "{":
            opened = _brace_kind(here, stmt)
            names = _parameters(stmt) if opened == "func" and here != "func" else set()
            frames.append([opened, [], names])
        elif text == "}":
            if len(frames) > 1:
                closed = frames.pop()[0]
                if closed in ("func", "ns") or frames[-1][0] == "func":
                    frames[-1][1] = []      # a definition or a block ends its statement
        elif text == ";":
            if here == "ns" and _program_scope_variable(stmt):
                found.append((stmt[0][0], PROGRAM_SCOPE))
            elif here == "func" and stmt:
                if any(t == "static" for _, _, t in stmt) and not any(
                        t in _CONST for _, _, t in stmt):
                    found.append((next(ln for ln, _, t in stmt if t == "static"), STATIC_LOCAL))
                runtime = set().union(*(f[2] for f in frames if f[0] == "func"))
                name, size, constant = _local_declaration(stmt)
                if size is not None and runtime & _plain_names(size):
                    found.append((stmt[0][0], VLA))
                if name and not constant:
                    frames[-1][2].add(name)
            frames[-1][1] = []
        else:
            stmt.append((line, kind, text))
    return found


_QUALIFIERS = frozenset("const constexpr constant thread volatile static unsigned signed".split())


def _local_declaration(stmt: list):
    """(name, the tokens between its first `[` and `]` or None, declared const) of a statement
    `[qualifiers] TYPE NAME ...`, or (None, None, False) for any other statement."""
    texts = [t for _, _, t in stmt]
    k = 0
    while k < len(texts) and texts[k] in _QUALIFIERS:
        k += 1
    constant = any(t in ("const", "constexpr", "constant") for t in texts[:k])
    if not (k + 1 < len(texts) and stmt[k][1] == "id" and stmt[k + 1][1] == "id"
            and texts[k] not in _NOT_A_TYPE and texts[k] not in ("return", "using", "typedef")):
        return None, None, False
    name = texts[k + 1]
    if k + 2 < len(texts) and texts[k + 2] == "[":
        end = _matching(texts, k + 2, "[", "]")
        return name, stmt[k + 3:end] if end is not None else None, constant
    return name, None, constant


def _plain_names(tokens: list) -> set[str]:
    """The identifiers of an expression not reached through a scope or an object (`Foo::n`,
    `p.n`): those a local or a parameter of the same name would be."""
    return {t for k, (_, kind, t) in enumerate(tokens)
            if kind == "id" and (k == 0 or tokens[k - 1][2] not in ("::", ".", "->"))}


def _parameters(stmt: list) -> set[str]:
    """The names a function's parameter list declares (the last `(...)` before its body):
    run-time values, whatever their qualifiers."""
    texts = [t for _, _, t in stmt]
    if ")" not in texts:
        return set()
    close = len(texts) - 1 - texts[::-1].index(")")
    depth, open_at = 0, None
    for k in range(close, -1, -1):
        depth += (texts[k] == ")") - (texts[k] == "(")
        if depth == 0:
            open_at = k
            break
    names, last, depth, in_default = set(), None, 0, False
    for k in range(open_at + 1, close):
        t = texts[k]
        if t in ("(", "[", "<"):
            depth += 1
        elif t in (")", "]", ">"):
            depth -= 1
        elif depth:
            continue
        elif t == ",":
            names.add(last) if last else None
            last, in_default = None, False
        elif t == "=":
            in_default = True           # a default argument: the name came before it
        elif not in_default and stmt[k][1] == "id":
            last = t
    if last:
        names.add(last)
    return names


def _brace_kind(enclosing: str, stmt: list) -> str:
    texts = [t for _, _, t in stmt]
    if any(t in ("struct", "class", "union", "enum") for t in texts):
        return "class"
    if enclosing == "func":
        return "func"                   # a block, a loop's body, a local initializer
    if "namespace" in texts or texts[:1] == ["extern"]:
        return "ns"
    k = len(texts) - 1
    while k >= 0 and texts[k] in _AFTER_PARAMS:
        k -= 1
    if k >= 0 and texts[k] == ")":
        return "func"
    if "->" in texts and "(" in texts:
        return "func"                   # a trailing return type
    return "init"


def _program_scope_variable(stmt: list) -> bool:
    texts = [t for _, _, t in stmt]
    if not texts or texts[0] in _NOT_A_VARIABLE or _CONST & set(texts) or "operator" in texts:
        return False
    paren = texts.index("(") if "(" in texts else len(texts)
    equals = texts.index("=") if "=" in texts else len(texts)
    # a function's declaration has its parameters before any `=` (a default argument)
    return paren == len(texts) or equals < paren


def _call_cycles(ids, texts: list[str], defs) -> list[tuple[int, str]]:
    """Functions of the file (not templates, one overload of their name and arity) that call
    each other round a cycle (`even` calls `odd`, `odd` calls `even`): recursion as well, which
    Metal refuses; named at the first call of the cycle's first function."""
    by_key = {(name, arity): (start, end) for name, arity, start, end in defs
              if "::" not in name}
    calls: dict[tuple[str, int], list[tuple[tuple[str, int], int]]] = {}
    for (name, arity), (start, end) in by_key.items():
        for k in range(start + 1, end):
            if texts[k + 1] != "(" or texts[k - 1] in (".", "->", "::") or texts[k] == name:
                continue
            close = _matching(texts, k + 1)
            callee = (texts[k], _arity(texts, k + 1, close) if close is not None else -1)
            if callee in by_key:
                calls.setdefault((name, arity), []).append((callee, ids[k][0]))
    found, reported = [], set()
    for first in by_key:
        path, seen = _cycle_from(first, calls)
        if path and frozenset(path) not in reported:
            reported.add(frozenset(path))
            names = " and ".join(dict.fromkeys(n for n, _ in path))
            line = next(ln for callee, ln in calls[first] if callee == path[1 % len(path)])
            found.append((line, f"Metal has no recursion ({names} call each other)"))
    return found


def _cycle_from(first, calls):
    """A path of calls from `first` back to it (its functions, `first` first), or None."""
    stack, seen = [(first, [first])], {first}
    while stack:
        node, path = stack.pop()
        for callee, _ in calls.get(node, ()):
            if callee == first and len(path) > 1:
                return path, seen
            if callee not in seen:
                seen.add(callee)
                stack.append((callee, path + [callee]))
    return None, seen


def _param_types(texts: list[str], open_at: int, close: int) -> tuple[str, ...]:
    """Each parameter's text without its name (`const float x` -> `const float`)."""
    params, current, depth = [], [], 0
    for t in texts[open_at + 1:close]:
        if t in ("(", "[", "<", "{"):
            depth += 1
        elif t in (")", "]", ">", "}"):
            depth -= 1
        if t == "," and depth == 0:
            params.append(current)
            current = []
        else:
            current.append(t)
    if current:
        params.append(current)
    out = []
    for p in params:
        if "=" in p:
            p = p[:p.index("=")]
        if len(p) > 1 and p[-1][:1].isalpha() or (len(p) > 1 and p[-1][:1] == "_"):
            p = p[:-1]
        out.append(" ".join(p))
    return tuple(out)


def _class_scopes(texts: list[str]) -> list[str]:
    """The innermost struct or class around each token ("" outside every one)."""
    scopes, stack, pending = [], [], None     # stack: per open brace, the innermost name
    for k, t in enumerate(texts):
        if t in ("struct", "class", "union") and k + 1 < len(texts):
            pending = texts[k + 1]
        elif t == ";":
            pending = None
        if t == "{":
            stack.append(pending or (stack[-1] if stack else ""))
            pending = None
        elif t == "}" and stack:
            stack.pop()
        scopes.append(stack[-1] if stack else "")
    return scopes


def _templated(texts: list[str], i: int) -> bool:
    """The declaration at `i` is a template: a call in it may be another instantiation
    (`operator()<half>` calling `operator()<float>`), which is not recursion."""
    k = i - 1
    while k >= 0 and texts[k] not in (";", "}", "{"):
        if texts[k] == "template":
            return True
        k -= 1
    return False


def _declares(ids, i: int) -> bool:
    """The name at `i` follows a type (`float fact(`, `T operator()(`): a declaration, not a
    call (`return fact(`, `x * fact(`, `obj.operator()(`)."""
    if i == 0:
        return False
    kind, prev = ids[i - 1][1], ids[i - 1][2]
    return (kind == "id" and prev not in _NOT_A_TYPE) or prev == ">"


def _matching(texts: list[str], open_at: int, opening: str = "(", closing: str = ")") -> int | None:
    depth = 0
    for k in range(open_at, len(texts)):
        if texts[k] == opening:
            depth += 1
        elif texts[k] == closing:
            depth -= 1
            if depth == 0:
                return k
    return None


def _arity(texts: list[str], open_at: int, close: int) -> int:
    """Top-level commas + 1 between the parentheses (0 for `()`, `(void)`); template angle
    brackets are not tracked (a `,` inside `f<a, b>(x)` is rare in a parameter list)."""
    inner = texts[open_at + 1:close]
    if not inner or inner == ["void"]:
        return 0
    depth, commas = 0, 0
    for t in inner:
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
        elif t == "," and depth == 0:
            commas += 1
    return commas + 1
