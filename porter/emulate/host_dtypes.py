"""Which dtypes a host kernel function lets reach its Metal kernel: its `AT_DISPATCH_*` macros
and its dtype checks (`TORCH_CHECK_TYPE(isFloatingType(iter.common_dtype()), ...)`), evaluated
for a sample's dtype as a Mac would run them.

A dispatch macro whose list lacks the dtype raises `"name" not implemented for 'BFloat16'` on a
Mac; a check whose condition is false raises its message. A check porter cannot evaluate (it
reads a scalar, a tensor's shape) is not proven: which dtypes pass it is not known here. Several
dispatches (the upstream nan_to_num: complex under `if (isComplexType(...))`, floating after it)
are read as one: a dtype none of them covers fails.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source.cpp_scan import code_mask, matching_close

# torch's dtype name -> its c10::ScalarType name (the one `not implemented for '...'` prints)
SCALAR_TYPE = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
               "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
               "complex32": "ComplexHalf", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"}
FLOATING = {"float32", "float64"}
INTEGRAL = {"uint8", "int8", "int16", "int32", "int64"}
COMPLEX = {"complex64", "complex128"}
REDUCED = {"float16", "bfloat16"}
# AT_DISPATCH_<BASE>[_AND<N>](...): the dtypes of BASE (ATen/Dispatch.h)
BASES = {
    "FLOATING_TYPES": FLOATING, "FLOATING_TYPES_AND_HALF": FLOATING | {"float16"},
    "REDUCED_FLOATING_TYPES": REDUCED, "INTEGRAL_TYPES": INTEGRAL, "ALL_TYPES": FLOATING | INTEGRAL,
    "COMPLEX_TYPES": COMPLEX, "FLOATING_AND_COMPLEX_TYPES": FLOATING | COMPLEX,
    "ALL_TYPES_AND_COMPLEX": FLOATING | INTEGRAL | COMPLEX,
}
DISPATCH_RE = re.compile(r"\bAT_DISPATCH_(\w+?)(?:_AND(\d*))?\s*\(")
CHECK_RE = re.compile(r"\b(?:TORCH_CHECK(?:_TYPE|_NOT_IMPLEMENTED|_VALUE)?|TORCH_INTERNAL_ASSERT)\s*\(")
# what names the iterator's dtype: a Mac's dispatch and checks read it
ITER_DTYPE = r"(?:iter\.(?:common_dtype|dtype|input_dtype)\(\s*\d*\s*\))"
CONSTANT_RE = re.compile(r"(?:(?:at|c10)::)?(?:ScalarType::(\w+)|k(\w+))")


class HostRefusal(NamedTuple):
    line: int
    message: str       # what a Mac raises, or why it is not proven ("not proven: ...")


def refusal(body: str, first_line: int, dtype: str) -> HostRefusal | None:
    """Why the host function (its live text `body`, starting on `first_line`) raises for the
    iterator's dtype `dtype` (torch's name) before or instead of running its kernel, or None."""
    mask = code_mask(body)
    names = dtype_names(body)
    covered, dispatches = set(), []
    for m in DISPATCH_RE.finditer(mask):
        args = _arguments(body, mask, m.end() - 1)
        line = first_line + body.count("\n", 0, m.start())
        base, count = m.group(1), m.group(2)
        extra = int(count or 1) if count is not None else 0
        types = _dispatch_types(base, args[:extra])
        if types is None or len(args) < extra + 2 or not _is_iter_dtype(args[extra], names):
            return HostRefusal(line, f"not proven: `AT_DISPATCH_{base}{'_AND' + count if count is not None else ''}"
                                     f"(...)` is a dtype dispatch porter does not read")
        covered |= types
        dispatches.append((line, args[extra + 1], m.group()[:-1].strip()))
    if dispatches and dtype not in covered:
        line, name, macro = dispatches[0]
        macros = list(dict.fromkeys(d[2] for d in dispatches))
        said = f"{macros[0]} covers" if len(macros) == 1 else f"{' and '.join(macros)} cover"
        return HostRefusal(line, f"{said} {', '.join(sorted(covered))}: a Mac raises "
                                 f"{name} not implemented for '{SCALAR_TYPE.get(dtype, dtype)}'")
    for line, condition, bare in _early_returns(body, mask, first_line):
        holds = evaluate(condition, dtype, names)
        if bare:
            # `if (iter.numel() == 0) return;` is not a dtype condition porter reads; one that
            # is and holds leaves the output unwritten for this dtype
            if holds:
                return HostRefusal(line, f"for {dtype} `if ({condition})` returns before the kernel "
                                         "call: the output is never written, and a Mac's test "
                                         "compares what the empty tensor held")
            if holds is None and DTYPE_WORD_RE.search(condition):
                # `iter.numel() == 0 || iter.common_dtype() == kHalf`: read as an empty
                # iterator's, it would hide the dtype the return leaves unwritten
                return HostRefusal(line, f"not proven: `if ({condition})` returns before the "
                                         "kernel call on a condition naming the dtype that porter "
                                         "does not evaluate: for some dtypes the output may never "
                                         "be written")
            continue
        if holds is None:
            return HostRefusal(line, f"not proven: `if ({condition})` leaves before the kernel "
                                     "call, after code porter does not model, on a condition "
                                     "porter does not evaluate")
        if holds:
            return HostRefusal(line, f"not proven: for {dtype} `if ({condition})` leaves before "
                                     "the kernel call, after code porter does not model (not "
                                     "the kernel porter runs)")
    for m in CHECK_RE.finditer(mask):
        args = _arguments(body, mask, m.end() - 1)
        line = first_line + body.count("\n", 0, m.start())
        holds = evaluate(args[0] if args else "", dtype, names)
        if holds is None:
            return HostRefusal(line, f"not proven: `{' '.join(m.group().split())}"
                                     f"{' '.join((args[0] if args else '').split())}, ...)` is a "
                                     "check porter does not evaluate; whether a Mac passes it is "
                                     "not known")
        if not holds:
            said = " ".join(a for a in args[1:] if a.startswith('"'))
            return HostRefusal(line, f"a Mac fails its check `{' '.join(args[0].split())}` for "
                                     f"{dtype}" + (f" and raises {said}" if said else ""))
    return None


EXEC_RE = re.compile(r"\bexec_(?:unary|binary|ternary)_kernel")
# words of a condition on the iterator's dtype (a ScalarType, or what gives one)
DTYPE_WORD_RE = re.compile(r"\b(?:common_dtype|dtype|scalar_type|ScalarType|k(?:Half|BFloat16|Float|"
                           r"Double|Bool|Byte|Char|Short|Int|Long|ComplexFloat|ComplexDouble)|is\w*Type)\b")
IF_RE = re.compile(r"\bif\s*\(")


def _early_returns(body: str, mask: str, first_line: int) -> list[tuple[int, str, bool]]:
    """(line, condition, bare) of each `if (condition) { ... return; }` among the function's own
    statements before its first kernel call whose block runs no kernel: one that runs other code
    (upstream silu's `at::mul_out` for complex inputs) leaves a dtype taking it not the kernel's
    to prove; a bare `if (...) return;` (`{ return; }`) runs nothing at all: an empty iterator's,
    or, on a dtype condition, an output left unwritten."""
    first_call = EXEC_RE.search(mask)
    end = first_call.start() if first_call else len(mask)
    open_at = mask.find("{")
    found, depth, k = [], 0, open_at + 1
    while 0 <= open_at and k < end:
        ch = mask[k]
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        elif depth == 0 and IF_RE.match(mask, k) and (k == 0 or not (mask[k - 1].isalnum() or mask[k - 1] == "_")):
            paren = mask.index("(", k)
            close = matching_close(mask, paren)
            brace = close + 1 + (len(mask[close + 1:]) - len(mask[close + 1:].lstrip()))
            where = first_line + body.count("\n", 0, k)
            condition = " ".join(body[paren + 1:close].split())
            unbraced = re.match(r"return\s*;", mask[brace:]) if close >= 0 else None
            if unbraced:                      # `if (...) return;`
                found.append((where, condition, True))
                k = brace + unbraced.end()
                continue
            if close < 0 or brace >= len(mask) or mask[brace] != "{":
                k += 1
                continue
            block_end = matching_close(mask, brace)
            block = mask[brace + 1:block_end]
            others = re.sub(r"\breturn\b[^;]*;", "", block).strip()
            if re.search(r"\breturn\b", block) and not EXEC_RE.search(block):
                found.append((where, condition, not others))
            k = block_end + 1
            continue
        k += 1
    return found


def _arguments(body: str, mask: str, open_at: int) -> list[str]:
    """The arguments of the call whose `(` is at `open_at`, split at the commas outside brackets
    and strings (a condition's `<` is no bracket: `TORCH_CHECK(dim < 4, "...")`)."""
    close = matching_close(mask, open_at)
    if close < 0:
        return []
    parts, depth, start = [], 0, open_at + 1
    for k in range(open_at + 1, close):
        ch = mask[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:k].strip())
            start = k + 1
    parts.append(body[start:close].strip())
    return parts


def dtype_names(body: str) -> set[str]:
    """Local names holding the iterator's dtype (`const auto dtype = iter.common_dtype();`)."""
    return set(re.findall(rf"\b(\w+)\s*=\s*{ITER_DTYPE}\s*;", body))


def _is_iter_dtype(expr: str, names: set[str]) -> bool:
    expr = " ".join(expr.split())
    return bool(re.fullmatch(ITER_DTYPE, expr)) or expr in names


def _dispatch_types(base: str, extras: list[str]) -> set[str] | None:
    if base not in BASES:
        return None
    found = set(BASES[base])
    for e in extras:
        name = _constant(e)
        if name is None:
            return None
        found.add(name)
    return found


def _constant(expr: str) -> str | None:
    """The torch dtype name of `kHalf`, `c10::kBFloat16`, `ScalarType::Float`, or None."""
    m = CONSTANT_RE.fullmatch(expr.strip())
    if not m:
        return None
    wanted = m.group(1) or m.group(2)
    return next((t for t, s in SCALAR_TYPE.items() if s == wanted), None)


PREDICATES = {
    "isFloatingType": lambda d, b: d in FLOATING | REDUCED,
    "isReducedFloatingType": lambda d, b: d in REDUCED,
    "isComplexType": lambda d, b: d in COMPLEX | {"complex32"},
    "isIntegralType": lambda d, b: d in INTEGRAL or (b and d == "bool"),
}
PREDICATE_RE = re.compile(r"(?:(?:c10|at)::)?(\w+)\(\s*(\w+(?:\.\w+\(\s*\d*\s*\))?)\s*(?:,\s*(true|false)\s*)?\)")
COMPARE_RE = re.compile(r"(\w+(?:\.\w+\(\s*\d*\s*\))?)\s*(==|!=)\s*((?:(?:at|c10)::)?(?:ScalarType::\w+|k\w+))")


def evaluate(condition: str, dtype: str, names: set[str] | None = None) -> bool | None:
    """The dtype condition of a check for `dtype`, or None when it is not one porter reads:
    `isFloatingType(iter.common_dtype())`, `c10::isIntegralType(iter.common_dtype(), false)`,
    `iter.common_dtype() != kBool`, `true`, `false`, joined with `!`, `&&`, `||` and parentheses."""
    names = names or set()
    expr = re.sub(r"/\*.*?\*/", "", condition)

    def predicate(m: re.Match) -> str:
        fn, arg, flag = m.group(1), m.group(2), m.group(3)
        if fn not in PREDICATES or not _is_iter_dtype(arg, names) or (fn == "isIntegralType") != bool(flag):
            raise ValueError
        return f" {PREDICATES[fn](dtype, flag == 'true')} "

    def compare(m: re.Match) -> str:
        wanted = _constant(m.group(3))
        if not _is_iter_dtype(m.group(1), names) or wanted is None:
            raise ValueError
        return f" {(dtype == wanted) == (m.group(2) == '==')} "

    try:
        expr = COMPARE_RE.sub(compare, expr)
        expr = PREDICATE_RE.sub(predicate, expr)
    except ValueError:
        return None
    expr = expr.replace("&&", " and ").replace("||", " or ").replace("!", " not ")
    # C++'s boolean literals (review 19's H27: `... != kBFloat16 || true` was not proven)
    expr = re.sub(r"\btrue\b", " True ", re.sub(r"\bfalse\b", " False ", expr))
    if not re.fullmatch(r"(?:\s|True|False|and|or|not|\(|\))*", expr) or not expr.strip():
        return None
    try:
        return bool(eval(expr, {"__builtins__": {}}, {}))     # only booleans and operators left
    except SyntaxError:
        return None
