"""Translate a CPU kernel's scalar lambda into the body of a Metal functor.

The translation is token based and conservative: every function the lambda calls must map to
a Metal builtin or to a `c10::metal` routine that the checkout's headers define; otherwise
porter says it could not translate, and the caller falls back to a failing skeleton.
"""

from __future__ import annotations

import math
import re
import struct
from typing import NamedTuple

from porter.source.cpp_scan import comments_blanked

TOKEN_RE = re.compile(
    r"(?P<name>(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)"
    r"|(?P<number>\d[\w.]*(?:[eE][+-]?\d+)?[fFlLuU]*)"
    r"|(?P<space>\s+)|(?P<other>.)", re.S)

# Math that Metal's `precise::` namespace provides with the std spelling.
PRECISE = {"exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "rsqrt", "pow", "powr", "sin",
           "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
           "acosh", "atanh", "cbrt", "fmod"}
# Exact operations in the plain `metal::` namespace.
METAL = {"abs", "fabs", "floor", "ceil", "trunc", "round", "rint", "copysign", "fmin", "fmax",
         "isnan", "isinf", "isfinite", "signbit", "nextafter", "fma"}
# std::min/std::max keep a NaN operand where the CPU's vectorized path (vec::minimum/maximum)
# does; Metal's own min/max return the other operand (min(NaN, 1) == 1): c10::metal's keep it.
NAN_KEEPING = {"std::min": "min", "std::max": "max", "::std::min": "min", "::std::max": "max"}
# CPU helpers -> c10::metal routine of the same meaning (translated only if the headers define it).
C10_METAL = {"std::log1p": "log1p", "std::erf": "erf", "std::erfc": "erfc", "calc_erfinv": "erfinv",
             "calc_i0": "i0", "calc_i0e": "i0e", "calc_i1": "i1", "calc_i1e": "i1e",
             "calc_digamma": "digamma", "calc_erfcx": "erfcx", "std::hypot": "hypot",
             "calc_zeta": "zeta", "std::lgamma": "log_gamma", "std::tgamma": "gamma",
             "calc_polygamma": "polygamma", "c10::metal::xlogy": "xlogy", "calc_ndtri": "ndtri"}
# CPU helpers with no single c10::metal routine: a Metal expression of one plain argument.
COMPOSITE = {
    "c10::is_negative": ("({0} < 0)", ()),
    "at::_isnan": ("::metal::isnan({0})", ()),
    "_isnan": ("::metal::isnan({0})", ()),
    "c10::copysign": (None, ()),
    "calc_log_ndtr": ("({0} < -1.0f ? ::precise::log(c10::metal::erfcx(-{0} * M_SQRT1_2_F) / 2) - "
                      "({0} * M_SQRT1_2_F) * ({0} * M_SQRT1_2_F) : "
                      "c10::metal::log1p(-c10::metal::erfc({0} * M_SQRT1_2_F) / 2))",
                      ("erfcx", "erfc", "log1p")),
}
CONSTANTS = {
    "std::numeric_limits<scalar_t>::quiet_NaN()": "NAN",
    "std::numeric_limits<scalar_t>::infinity()": "INFINITY",
    "std::numeric_limits<opmath_t>::quiet_NaN()": "NAN",
    "std::numeric_limits<opmath_t>::infinity()": "INFINITY",
    "c10::pi<opmath_t>": "M_PI_F",
    "c10::pi<scalar_t>": "M_PI_F",
    "c10::pi<float>": "M_PI_F",
    "c10::pi<T>": "M_PI_F",
    "std::numeric_limits<scalar_t>::epsilon()": "FLT_EPSILON",
    "std::numeric_limits<value_t>::infinity()": "INFINITY",
    # a reduced-float path computing in float (logit's)
    "std::numeric_limits<float>::infinity()": "INFINITY",
    "std::numeric_limits<float>::quiet_NaN()": "NAN",
}
KEYWORDS = {"static_cast", "return", "if", "else", "const", "auto", "float", "int", "bool", "T",
            "true", "false", "NAN", "INFINITY", "FLT_EPSILON", "M_SQRT1_2_F", "M_PI_F", "M_LN2_F", "sizeof"}


# <cmath>'s double constants (M_SQRT2 ...): Metal has only their float `_F` spellings
MATH_CONSTANTS = {"M_E": math.e, "M_LOG2E": math.log2(math.e), "M_LOG10E": math.log10(math.e),
                  "M_LN2": math.log(2), "M_LN10": math.log(10), "M_PI": math.pi,
                  "M_PI_2": math.pi / 2, "M_PI_4": math.pi / 4, "M_1_PI": 1 / math.pi,
                  "M_2_PI": 2 / math.pi, "M_2_SQRTPI": 2 / math.sqrt(math.pi),
                  "M_SQRT2": math.sqrt(2), "M_SQRT1_2": math.sqrt(0.5)}
KEYWORDS |= {f"{name}_F" for name in MATH_CONSTANTS}
CAST_OPEN_RE = re.compile(r"\b(?:float|scalar_t|opmath_t|T)\s*\(")
CONSTANT_EXPR_RE = re.compile(r"(?:[\d.eE]+[fF]?|M_\w+|[-+*/()\s])+")
CONSTANT_NAME_RE = re.compile(r"\bM_[A-Z0-9_]+\b(?!_F)")


def fold_math_constants(body: str) -> str:
    """`float(M_SQRT2 * M_2_SQRTPI * 0.5)` -> `0.797884583f`: a cast of an expression of <cmath>
    constants and numbers is computed as the CPU computes it (in double, rounded once to float);
    a constant outside such a cast becomes Metal's float spelling (`M_SQRT2` -> `M_SQRT2_F`)."""
    def fold(expr: str) -> str | None:
        names = CONSTANT_NAME_RE.findall(expr)
        if not names or any(n not in MATH_CONSTANTS for n in names) or not CONSTANT_EXPR_RE.fullmatch(expr):
            return None
        python = CONSTANT_NAME_RE.sub(lambda n: repr(MATH_CONSTANTS[n.group()]), expr)
        python = re.sub(r"(\d)[fF]\b", r"\1", python)
        try:
            value = eval(python, {"__builtins__": {}}, {})     # digits and + - * / ( ) only
        except (SyntaxError, ZeroDivisionError, TypeError):
            return None
        digits = f"{struct.unpack('f', struct.pack('f', float(value)))[0]:.9g}"    # round-trips a float
        return digits + ("" if re.search(r"[.eEn]", digits) else ".0") + "f"
    out, at = [], 0
    for m in CAST_OPEN_RE.finditer(body):
        if m.start() < at:
            continue
        close = _closing(body, m.end() - 1)
        folded = fold(body[m.end():close]) if close > 0 else None
        if folded is not None:
            out.append(body[at:m.start()] + folded)
            at = close + 1
    body = "".join(out) + body[at:]
    return CONSTANT_NAME_RE.sub(lambda n: n.group() + "_F" if n.group() in MATH_CONSTANTS else n.group(),
                                body)


class Translation(NamedTuple):
    statements: str | None   # Metal statements (with `return`), None when not translatable
    reason: str = ""


def translate(body: str, params: tuple[str, ...], scalar: str, c10_functions) -> Translation:
    """Rewrite a lambda body for Metal; `scalar` replaces `scalar_t` (`T` or `float`).

    `c10_functions()` returns the c10::metal routine names available (called only if needed).
    """
    # a comment's words are no calls (gelu_backward's `// erfc(-z) instead of 1 + erf(z)`)
    body = re.sub(r"\n[ \t]*//[^\n]*", "", body)       # a line of comment goes with its line
    body = re.sub(r"[ \t]+\n", "\n", comments_blanked(body))
    if "return" not in body:
        body = f"return {body.strip().rstrip(';')};"
    for cpu, metal in CONSTANTS.items():
        body = body.replace(cpu, metal)
    body = fold_math_constants(body)
    body = _clamp_as_min_max(body)
    # variables the body declares itself (`opmath_t product = ...`) read as its parameters do
    params = tuple(params) + tuple(n for n in declared_names(body) if n not in params)
    out: list[str] = []
    tokens = [(m.lastgroup, m.group()) for m in TOKEN_RE.finditer(body)]
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = _next_significant(tokens, i)
        if kind != "name":
            out.append(text)
            i += 1
            continue
        called = nxt == "("
        if text in ("scalar_t", "opmath_t", "value_t"):
            # value_t: a complex kernel's real part type, the value itself for real dtypes
            out.append(scalar if text in ("scalar_t", "value_t") else "float")
        elif text in params or text in KEYWORDS:
            out.append(text)
        elif text in COMPOSITE and called:
            template, needs = COMPOSITE[text]
            missing = [n for n in needs if n not in c10_functions()]
            if template is None or missing:
                return Translation(None, f"`{text}` has no Metal equivalent in this checkout")
            arg, j = _call_argument(tokens, i)
            if arg is None or arg not in params:
                return Translation(None, f"`{text}` is only translated for a plain argument")
            out.append(template.format(arg))
            i = j
            continue
        elif text in NAN_KEEPING and called:
            name = NAN_KEEPING[text]
            if name not in c10_functions():
                return Translation(None, f"`{text}` needs c10::metal::{name} (Metal's own {name} "
                                         "drops a NaN the CPU keeps), which this checkout's c10/metal "
                                         "headers do not define")
            out.append(f"c10::metal::{name}")
        elif text in C10_METAL and called:
            name = C10_METAL[text]
            if name in c10_functions():
                out.append(f"c10::metal::{name}")
            elif _helper(c10_functions, text):
                out.append(_helper(c10_functions, text))
            else:
                return Translation(None, f"`{text}` needs c10::metal::{name}, which this checkout's "
                                         "c10/metal headers do not define" + _why_not(c10_functions, text))
        elif called and _plain(text) in PRECISE and _std(text):
            out.append(f"::precise::{_plain(text)}")
        elif called and _plain(text) in METAL and _std(text):
            out.append(f"::metal::{_plain(text)}")
        elif called and _helper(c10_functions, text):
            # a CPU helper (native/Math.h) translated into c10/metal (porter.port.helpers)
            out.append(_helper(c10_functions, text))
        else:
            return Translation(None, f"`{text}` has no known Metal translation" + _why_not(c10_functions, text))
        i += 1
    statements = "".join(out).strip()
    return Translation(statements)


DECLARED_RE = re.compile(
    r"(?:^|(?<=[;{}(]))\s*(?:(?:const|constexpr)\s+)*"
    r"(?:scalar_t|opmath_t|value_t|float|double|auto|int64_t|long|int|uint|uchar|uint8_t|size_t|bool|T)"
    r"\s+([A-Za-z_]\w*)\s*(?:\[\s*\w*\s*\])?\s*(?=[=({;,])")


# `T x, z, num, dem;`: the names after the first of a declaration list
MORE_DECLARED_RE = re.compile(
    r"(?:^|(?<=[;{}]))\s*(?:(?:const|constexpr)\s+)*(?:scalar_t|opmath_t|value_t|float|double|auto|"
    r"int64_t|long|int|uint|size_t|bool|T)\s+(\w+(?:\s*,\s*\w+)+)\s*;")


def declared_names(body: str) -> list[str]:
    """The variables a statement list declares (`opmath_t product = ...;`, `const float three(3);`,
    `T x, z;`)."""
    names = DECLARED_RE.findall(body)
    for group in MORE_DECLARED_RE.findall(body):
        names += [n.strip() for n in group.split(",")]
    return list(dict.fromkeys(names))


def _clamp_as_min_max(body: str) -> str:
    """`std::clamp(v, lo, hi)` -> `std::min(std::max(v, lo), hi)`: the NaN-keeping pair
    (Metal's clamp of a NaN is unspecified)."""
    from porter.source.cpp_scan import matching_close, split_top_level
    at = body.rfind("std::clamp(")
    while at >= 0:
        open_at = at + len("std::clamp")
        close = matching_close(body, open_at)
        parts = split_top_level(body[open_at + 1:close]) if close > 0 else []
        if len(parts) == 3:
            v, lo, hi = (p.strip() for p in parts)
            body = body[:at] + f"std::min(std::max({v}, {lo}), {hi})" + body[close + 1:]
        at = body.rfind("std::clamp(", 0, at)
    return body


class Context(NamedTuple):
    body: str | None       # the lambda body with the kernel's locals it reads declared first
    reason: str = ""


# how a kernel turns its Scalar parameter into a value: each becomes the schema scalar itself
# (the host converts it, porter.port.scalars.host_value)
SCALAR_READS = (
    re.compile(r"\b(\w+)\.to<\s*[\w:]+\s*>\(\s*\)"),                      # lambd.to<scalar_t>()
    re.compile(r"\b(\w+)\.value_or\([^()]*\)"),                               # nan.value_or(0.)
    re.compile(r"\b(\w+)\.has_value\(\)\s*\?.*\bstd::numeric_limits<\w+>::(?:max|lowest)\(\)"),
)
CAST_OF_NAME_RE = re.compile(r"^(?:static_cast<[\w:]+>|scalar_t|opmath_t|float)\s*[({]\s*(\w+)\s*[)}]$")


def with_context(lam, scalar_names: tuple[str, ...] = (), in_float: bool = False) -> Context:
    """The lambda body with what it reads of its kernel function: a constant (`const scalar_t
    three(3)`) is declared at the top of the body, a conversion of a Scalar parameter
    (`lambd_val = lambd.to<scalar_t>()`, `nan.value_or(0.)`) is the schema scalar itself
    (renamed where the names differ), and a local computed from them (`negcoef = alpha * scale`)
    is declared from those. The kernel parameters map to `scalar_names` in order. A lambda the
    kernel chooses by its scalars (`lam.choice`: logit's `if (eps < 0)`) becomes one body that
    branches on the same condition. `in_float`: the functor computes in float, where a local of
    the op's dtype is rounded to it (`T(...)`) as the CPU's is."""
    choice = getattr(lam, "choice", None)
    if choice is not None:
        return _with_choice(lam, choice, scalar_names, in_float)
    body = lam.body
    kernel_params = tuple(getattr(lam, "kernel_params", ()) or ())
    to_schema = dict(zip(kernel_params, scalar_names)) if len(kernel_params) == len(scalar_names) \
        else {n: n for n in scalar_names}
    locals_ = {local.name: local for local in getattr(lam, "context", ()) or ()}
    own = set(declared_names(body)) | set(lam.params)
    needed, frontier = [], [body]
    while frontier:
        text = frontier.pop()
        for name in re.findall(r"(?<![\w.:])([A-Za-z_]\w*)\b", text):
            if name in locals_ and name not in own and name not in needed:
                needed.append(name)
                frontier.append(locals_[name].init)
    prelude, renames = [], {}
    for local in locals_.values():          # in declaration order
        if local.name not in needed:
            continue
        init = _schema_reads(local.init, to_schema)
        m = CAST_OF_NAME_RE.match(init)
        plain = m.group(1) if m else init
        if plain in scalar_names:
            if plain != local.name:
                renames[local.name] = plain
            continue
        init = _rename_words(init, renames)
        if in_float and re.search(r"\bscalar_t\b", local.type):
            # a kernel local of the op's dtype (logit's `hi = scalar_t(1) - eps`) holds that
            # dtype's rounding, which both CPU loops capture: a functor computing in float rounds
            # it too (half's 1 - 1e-6 is 1: review 40's logit port)
            init = f"T({init})"
        prelude.append(f"{local.type} {local.name} = {init};")
    body = _rename_words(_schema_reads(body, to_schema), renames)
    if prelude:
        body = "\n".join(prelude) + "\n" + body
    return Context(body)


def _with_choice(lam, choice, scalar_names: tuple[str, ...], in_float: bool) -> Context:
    """`if (COND) { the lambda's body } else { the other lambda's body }`, each with what it reads
    of its kernel function, COND with the kernel's scalars read as the schema's. Each lambda
    keeps its own statements, so each keeps its own NaN and infinity behaviour."""
    other = choice.otherwise
    if len(other.params) != len(lam.params):
        return Context(None, f"the CPU lambdas at {lam.path}:{lam.line} and {other.path}:{other.line} "
                             "take different numbers of arguments")
    # the other lambda's arguments under this one's names (logit_backward: both `dy, x`)
    renamed = _rename_words(other.body, dict(zip(other.params, lam.params)))
    then = with_context(lam._replace(choice=None), scalar_names, in_float)
    otherwise = with_context(other._replace(body=renamed, params=lam.params, choice=None),
                             scalar_names, in_float)
    test = with_context(lam._replace(body=f"return {choice.condition};", context=choice.context,
                                     choice=None), scalar_names, in_float)
    if None in (then.body, otherwise.body, test.body):
        return Context(None, then.reason or otherwise.reason or test.reason)
    prelude, _, condition = test.body.rpartition("\n")
    condition = condition.strip().removeprefix("return").strip().rstrip(";").strip()
    body = (f"{prelude}\n" if prelude else "") + (
        f"if ({condition}) {{\n{then.body}\n}} else {{\n{otherwise.body}\n}}")
    return Context(body)


def own_copies(body: str, params: tuple[str, ...], types: tuple[str, ...]) -> str:
    """A lambda that assigns to its by-value argument (`x = x < lo ? lo : x;`) writes to its own
    copy; a functor's arguments are const, so the copy is declared (`scalar_t x_ = x;`) and the
    body reads and writes it."""
    for p, typ in zip(params, types):
        if not re.search(rf"(?<![\w.:]){re.escape(p)}\s*(?:[-+*/%&|^]?=(?!=)|\+\+|--)"
                         rf"|(?:\+\+|--)\s*{re.escape(p)}\b", body):
            continue
        copy = f"{p}_"
        body = f"{typ} {copy} = {p};\n" + re.sub(rf"(?<![\w.:]){re.escape(p)}\b", copy, body)
    return body


def _schema_reads(text: str, to_schema: dict[str, str]) -> str:
    for pattern in SCALAR_READS:
        text = pattern.sub(lambda m: to_schema.get(m.group(1), m.group(0)), text)
    return text.strip()


def _rename_words(text: str, renames: dict[str, str]) -> str:
    if not renames:
        return text
    return re.sub(r"(?<![\w.:])([A-Za-z_]\w*)\b", lambda m: renames.get(m.group(1), m.group(1)), text)


def translate_lambda(lam, scalar_names: tuple[str, ...], scalar: str, c10_functions) -> Translation:
    """The CPU lambda `lam` with its kernel's context (with_context), translated for Metal."""
    context = with_context(lam, scalar_names, in_float=scalar != "T")
    if context.body is None:
        return Translation(None, context.reason)
    types = tuple(getattr(lam, "param_types", ()) or ("scalar_t",) * len(lam.params))
    context = context._replace(body=own_copies(context.body, tuple(lam.params),
                                               tuple(t.replace("&", "").strip() for t in types)))
    known = set(declared_names(context.body)) | set(lam.params) | set(scalar_names)
    for name in getattr(lam, "locals", ()) or ():
        if name not in known and re.search(rf"(?<![\w.:]){re.escape(name)}\b", context.body):
            return Translation(None, f"the CPU lambda at {lam.path}:{lam.line} uses `{name}`, a local "
                                     "of its kernel function that is not in the lambda's scope")
    return translate(context.body, tuple(lam.params) + tuple(scalar_names), scalar, c10_functions)


def _helper(c10_functions, name: str) -> str | None:
    """The Metal spelling of CPU helper `name`, where `c10_functions` can translate helpers
    (porter.port.helpers.Library)."""
    helper = getattr(c10_functions, "helper", None)
    if helper is None or "::" in name:      # a helper of at::native, called by its plain name
        return None
    return helper(name)


def _why_not(c10_functions, name: str) -> str:
    refused = getattr(c10_functions, "refused", {})
    return f"; its translation is refused: {refused[name]}" if name in refused else ""


# CPU spellings of complex operations -> the c10::metal routine with a float2 overload
COMPLEX_C10 = {"conj_impl": "conj", "std::conj": "conj", "std::log1p": "log1p", "sgn_impl": "sgn",
               "std::acosh": "acosh", "std::asinh": "asinh", "std::atanh": "atanh"}


def translate_complex(lam, complex_functions, library=None, helper=None) -> Translation:
    """The complex case's lambda (`conj_impl(a)`) as a complex overload's statements: each call a
    c10::metal routine with a float2 overload (`complex_functions()`), or one porter writes into
    c10/metal (`library`: a porter.port.helpers.Library, whose complex_routine says), nothing else,
    since the arithmetic operators of float2 are elementwise, not complex (`a * b` is not
    c10::metal::mul). A CPU helper with no such routine (`sgn_impl(a)`) is `helper(name)`'s
    expression of its argument (porter.port.complex_cpu_helpers), which raises ValueError naming
    what it lacks."""
    expr = getattr(lam, "expression", None)
    if expr is None:
        return Translation(None, "the complex case is not one returned expression")
    call = re.fullmatch(r"(\w+)\(\s*(\w+)\s*\)", expr)
    if call and call.group(2) in lam.params and helper is not None and \
            COMPLEX_C10.get(call.group(1)) not in complex_functions():
        try:
            return Translation(f"return {helper(call.group(1)).format(call.group(2))};")
        except ValueError as why:
            return Translation(None, str(why))
    routines = "|".join(re.escape(c) for c in COMPLEX_C10)
    rest = re.sub(rf"(?<![\w:])(?:{routines})\s*\(|[()\s]", "", expr)
    if rest not in lam.params:
        return Translation(None, f"the complex case `{expr}` is more than complex routines of its argument")
    out = expr
    for cpu, name in COMPLEX_C10.items():
        call = re.compile(rf"(?<![\w:]){re.escape(cpu)}\s*\(")
        if not call.search(out):
            continue
        if name in complex_functions():
            out = call.sub(f"c10::metal::{name}(", out)
            continue
        if library is None or not library.complex_routine(name):
            reason = library.refused.get(name) if library is not None else None
            return Translation(None, f"`{cpu}` needs c10::metal::{name} for complex values, which "
                                     "this checkout's c10/metal headers do not define"
                               + (f" ({reason})" if reason else ""))
        # porter's routine takes float2 (complex opmath); a half2 argument converts explicitly,
        # as Metal converts no vector type into another implicitly
        m = call.search(out)
        while m:
            close = _closing(out, m.end() - 1)
            out = (out[:m.start()] + f"c10::metal::{name}(float2(" + out[m.end():close]
                   + "))" + out[close + 1:])
            m = call.search(out)
    return Translation(f"return {out};")


def _plain(name: str) -> str:
    return name.rsplit("::", 1)[-1]


def _std(name: str) -> bool:
    """`std::log`, `::std::log`, `log` and the global `::log` (Math.h writes that too)."""
    return name.startswith(("std::", "::std::")) or "::" not in name or bool(re.fullmatch(r"::\w+", name))


def _next_significant(tokens, i: int) -> str | None:
    for kind, text in tokens[i + 1:]:
        if kind != "space":
            return text
    return None


def _previous_significant(tokens, i: int) -> str | None:
    for kind, text in reversed(tokens[:i]):
        if kind != "space":
            return text
    return None


def _call_argument(tokens, i: int) -> tuple[str | None, int]:
    """The single argument of the call whose name is token i, and the index after `)`."""
    j = i + 1
    while tokens[j][0] == "space":
        j += 1
    depth, parts = 0, []
    for k in range(j, len(tokens)):
        text = tokens[k][1]
        if text == "(":
            depth += 1
            if depth == 1:
                continue
        elif text == ")":
            depth -= 1
            if depth == 0:
                arg = "".join(parts).strip()
                return (arg if re.fullmatch(r"\w+", arg) else None), k + 1
        parts.append(text)
    return None, len(tokens)


def rename(statements: str, old: tuple[str, ...], new: tuple[str, ...]) -> str:
    """The lambda's parameter names replaced by the functor's, unless a new name is taken."""
    if tuple(old) == tuple(new) or len(old) != len(new):
        return statements
    words = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", statements))
    if (words - set(old)) & set(new):
        return statements
    mapping = dict(zip(old, new))
    return re.sub(r"(?<![\w.:])([A-Za-z_]\w*)\b",
                  lambda m: mapping.get(m.group(1), m.group(1)), statements)


def wrap_returns(statements: str, cast: str, typed: dict[str, str] | None = None) -> str:
    """`return E;` -> `return static_cast<cast>(E);` for every return of a statement list; no
    cast where E already has type `cast`: a cast to it, a name `typed` gives that type (the
    functor's `T` arguments), a selection between two such values, or for bool a comparison."""
    def one(m):
        expr = m.group(1).strip()
        inner = _strip_parens(expr)
        if type_of(inner, typed or {}) == cast:
            return f"return {inner};"
        head = "static_cast<float>("
        if inner.startswith(head) and _closing(inner, len(head) - 1) == len(inner) - 1:
            # the lambda's cast to its scalar type, which the float overload computes in
            inner = _strip_parens(inner[len(head):-1])
        return f"return static_cast<{cast}>({inner});"
    return re.sub(r"\breturn\s+(.*?);", one, statements, flags=re.S)


CAST_RE = re.compile(r"(?:static_cast<(\w+)>|(\w+))\(")


def type_of(expr: str, typed: dict[str, str]) -> str | None:
    """The type of a Metal expression where it is plain to see, else None: a typed name, a cast
    (`static_cast<X>(E)`, `X(E)` for a type X), a comparison (bool), `c ? A : B` with A and B of
    one type."""
    expr = _strip_parens(expr.strip())
    if expr in typed:
        return typed[expr]
    m = CAST_RE.match(expr)
    if m and _closing(expr, m.end() - 1) == len(expr) - 1:
        name = m.group(1) or m.group(2)
        if m.group(1) or name in CAST_TYPES or name in typed.values():
            return name
    if _is_bool(expr):
        return "bool"
    parts = _ternary(expr)
    if parts:
        then, otherwise = type_of(parts[1], typed), type_of(parts[2], typed)
        return then if then is not None and then == otherwise else None
    return None


CAST_TYPES = {"T", "float", "half", "bfloat", "bool", "int", "long", "short", "char", "uchar",
              "float2", "half2"}


def _ternary(expr: str) -> tuple[str, str, str] | None:
    """`c ? a : b` split at its top level, or None (also for nested selections)."""
    depth, question, i = 0, -1, 0
    while i < len(expr):
        c = expr[i]
        if expr.startswith("::", i):
            i += 2
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == "?":
            if question >= 0:
                return None
            question = i
        elif depth == 0 and c == ":" and question >= 0:
            return expr[:question].strip(), expr[question + 1:i].strip(), expr[i + 1:].strip()
        i += 1
    return None


def exact_in_input_type(statements: str) -> bool:
    """Only comparisons, selections and casts of the arguments: computing in the input type is
    exact, so the floating overload needs no detour through float (heaviside)."""
    code = re.sub(r"static_cast<\w+>\(", "(", statements)
    code = re.sub(r"\b(?:T|bool)\(", "(", code)
    code = code.replace("return", "")
    return not re.search(r"[+\-*/%~^|&]|\w\s*\(|\.", code)


def _strip_parens(expr: str) -> str:
    """`(E)` -> `E` while the outer parentheses enclose the whole expression."""
    while expr.startswith("(") and expr.endswith(")") and _closing(expr, 0) == len(expr) - 1:
        expr = expr[1:-1].strip()
    return expr


def _closing(expr: str, at: int) -> int:
    depth = 0
    for i in range(at, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        if depth == 0:
            return i
    return -1


BOOL_CALLS = ("::metal::signbit(", "::metal::isnan(", "::metal::isinf(", "::metal::isfinite(")


def _is_bool(expr: str) -> bool:
    """A comparison or classification call with nothing around it."""
    if any(expr.startswith(c) and _closing(expr, len(c) - 1) == len(expr) - 1 for c in BOOL_CALLS):
        return True
    return bool(re.fullmatch(r"[\w.:]+(?:\([^()]*\))?\s*(?:<|>|<=|>=|==|!=)\s*[\w.:]+", expr))


def as_float(statements: str, params: tuple[str, ...], floats: tuple[str, ...] = ()) -> str:
    """Computing in float: each parameter read as `float(p)`, never `float(float(p))`, and no
    `static_cast<float>` of a value that is a float already (`floats`: names declared float)."""
    for p in params:
        statements = re.sub(rf"(?<![\w.]){re.escape(p)}\b", f"float({p})", statements)
        statements = statements.replace(f"float(float({p}))", f"float({p})")
        statements = statements.replace(f"static_cast<float>(float({p}))", f"float({p})")
        statements = statements.replace(f"float{{float({p})}}", f"float({p})")
    return drop_float_casts(statements, frozenset(floats))


FLOAT_CAST = "static_cast<float>("
FLOAT_LITERAL_RE = re.compile(r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|\d+[eE][+-]?\d+[fF]?|\d+[fF]")
MATH_CALL_RE = re.compile(r"(?:::precise::|::metal::|c10::metal::)\w+\(")
ATOM_RE = re.compile(r"[\w.:]+")


def drop_float_casts(statements: str, floats: frozenset[str] = frozenset()) -> str:
    """`static_cast<float>(E)` -> `E` where E is plainly a float already (in the float overload:
    `float(x)`, float literals, c10::metal/precise math, and arithmetic of those)."""
    at = statements.rfind(FLOAT_CAST)
    while at >= 0:
        close = _closing(statements, at + len(FLOAT_CAST) - 1)
        inner = statements[at + len(FLOAT_CAST):close] if close > 0 else ""
        if inner and (at == 0 or not (statements[at - 1].isalnum() or statements[at - 1] == "_")) \
                and _is_float(inner, floats):
            inner = _strip_parens(inner)
            keep = inner if _is_atom(inner) else f"({inner})"
            statements = statements[:at] + keep + statements[close + 1:]
        at = statements.rfind(FLOAT_CAST, 0, at)
    return statements


def _is_atom(expr: str) -> bool:
    """A name, a literal or one whole call: needs no parentheses anywhere."""
    if ATOM_RE.fullmatch(expr):
        return True
    m = re.match(r"(?:static_cast<\w+>|[\w:]+)\(", expr)
    return bool(m) and _closing(expr, m.end() - 1) == len(expr) - 1


def _is_float(expr: str, floats: frozenset[str]) -> bool:
    expr = _strip_parens(expr.strip())
    if expr in floats or FLOAT_LITERAL_RE.fullmatch(expr):
        return True
    if _is_bool(expr) or any(expr.startswith(c) for c in BOOL_CALLS):
        return False
    for head in (FLOAT_CAST, "float("):
        if expr.startswith(head) and _closing(expr, len(head) - 1) == len(expr) - 1:
            return True
    m = MATH_CALL_RE.match(expr)
    if m and _closing(expr, m.end() - 1) == len(expr) - 1:
        return True
    if expr.startswith("-") and not expr.startswith("--"):
        return _is_float(expr[1:], floats)
    parts = _ternary(expr)
    if parts:
        return _is_float(parts[1], floats) and _is_float(parts[2], floats)
    terms = _arithmetic_terms(expr)
    return len(terms) > 1 and all(_is_float(t, floats) for t in terms)


def _arithmetic_terms(expr: str) -> list[str]:
    """`E1 op E2 op ...` split at its top-level `+ - * /` (binary ones only)."""
    terms, depth, start, prev = [], 0, 0, ""
    for i, c in enumerate(expr):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c in "+-*/" and (prev.isalnum() or prev in "_).") \
                and not (c in "+-" and i > 0 and expr[i - 1] in "eE" and expr[i - 2:i - 1].isdigit()):
            terms.append(expr[start:i])
            start = i + 1
        elif c in "<>=!?:&|%^" and not (c == ":" and ":" in (expr[i - 1:i], expr[i + 1:i + 2])):
            if depth == 0:
                return [expr]       # a comparison or selection: not plain arithmetic
        if not c.isspace():
            prev = c
    terms.append(expr[start:])
    return [t.strip() for t in terms]


CLOSERS = {")": "(", "]": "[", "}": "{"}


def expression_problem(expr: str, params: tuple[str, ...]) -> str | None:
    """Why `expr` cannot be the body of a functor of `params` (a `--body`), or None.

    Catches what a typo makes: nothing, statements, unbalanced brackets, a dangling operator,
    the other functor kind's argument names. The Metal compiler judges the rest.
    """
    text = expr.strip().rstrip(";").strip()
    if not text:
        return "is empty"
    # `;` is what separates statements; braces alone are brace-initialisation
    # (`log_functor{}(x)`, `float2{x.x, 0}`), a part of an expression.
    if ";" in text:
        return "holds statements, not one expression (the functor returns the expression)"
    tokens = [(m.lastgroup, m.group()) for m in TOKEN_RE.finditer(text)]
    open_brackets = []
    for _, token in tokens:
        if token in "([{":
            open_brackets.append(token)
        elif token in CLOSERS:
            if not open_brackets or open_brackets.pop() != CLOSERS[token]:
                return f"has an unmatched '{token}'"
    if open_brackets:
        return f"has an unclosed '{open_brackets[-1]}'"
    significant = [(k, t) for k, t in tokens if k != "space"]
    first, last = significant[0], significant[-1]     # `::precise::log` is one name token
    if last[0] == "other" and last[1] in "+-*/%&|^<>=!?:,.~":
        return f"ends in '{last[1]}', an operator without its operand"
    if first[0] == "other" and first[1] in "*/%&|^<>=?:,.":
        return f"starts with '{first[1]}', an operator without its operand"
    others = ({"x"} if len(params) == 2 else {"a", "b"}) if set(params) <= {"x", "a", "b"} \
        else {"x", "a", "b"}
    used = {t for i, (k, t) in enumerate(tokens) if k == "name" and _next_significant(tokens, i) != "("
            and _previous_significant(tokens, i) != "."}        # `a.x` is a member, not x
    wrong = sorted((used & others) - set(params))
    if wrong:
        return f"uses {' and '.join(wrong)}, but the functor's arguments are {' and '.join(params)}"
    return None


def bool_valued(lam) -> bool:
    """A lambda returning a truth value in its output's dtype: its argument is another dispatch's
    type (`self_t a`), its return the output's (`-> scalar_t`), and it reads its arguments as truth
    values only (logical_not's `static_cast<scalar_t>(!a)`): the op's own result is bool."""
    if lam is None or lam.return_type != "scalar_t" or not lam.param_types \
            or all(t == "scalar_t" for t in lam.param_types):
        return False
    return truthiness(_without_output_cast(lam.body), tuple(lam.params)) is not None


def strip_output_cast(statements: str) -> str:
    """A translated bool-valued body without its cast into the output's dtype (`static_cast<T>`)."""
    return re.sub(r"\breturn\s+static_cast<T>\((.*)\)\s*;", r"return \1;", statements)


def _without_output_cast(body: str) -> str:
    """`return static_cast<scalar_t>(E);` -> `return E;` (the cast into the output's dtype)."""
    return re.sub(r"\breturn\s+static_cast<scalar_t>\((.*)\)\s*;", r"return \1;", body)


TRUTH = "c10::metal::cast_to<bool>"
BOOL_CAST_RE = r"(?:static_cast<bool>|bool)\(\s*{p}\s*\)"
LOGICAL = {"&&", "||"}


def truthiness(statements: str, params: tuple[str, ...]) -> str | None:
    """The body of a functor returning bool that reads its arguments only as truth values
    (`a && b`, `a || b`, `!a`, `bool(a) != bool(b)`), each read written as
    `c10::metal::cast_to<bool>(a)`: `a != 0` for real types, either part nonzero for complex
    ones (as the CPU's `bool(c10::complex)`), so one template serves every input dtype. None
    when an argument is read otherwise (compared, computed with): that body needs an overload
    per kind of dtype."""
    out = statements
    for p in params:
        out = re.sub(BOOL_CAST_RE.format(p=re.escape(p)), f"{TRUTH}({p})", out)
    tokens = [m.group() for m in re.finditer(r"&&|\|\||::|[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\s+|.", out,
                                             re.S)]
    significant = [i for i, t in enumerate(tokens) if not t.isspace()]
    wrapped = False
    for n, i in enumerate(significant):
        if tokens[i] not in params:
            continue
        if n >= 5 and "".join(tokens[j] for j in significant[n - 5:n]) == TRUTH + "(":
            continue        # already cast_to<bool>(p)
        prev = tokens[significant[n - 1]] if n else ""
        after = tokens[significant[n + 1]] if n + 1 < len(significant) else ""
        truth_prev = prev in LOGICAL | {"!", "return"}
        truth_next = after in LOGICAL | {";"}
        if not (truth_prev and truth_next):
            return None
        tokens[i] = f"{TRUTH}({tokens[i]})"
        wrapped = True
    result = "".join(tokens)
    if not wrapped and result == statements:
        return None
    # every read of an argument is now a truth value
    bare = re.sub(rf"{re.escape(TRUTH)}\(\s*\w+\s*\)", "", result)
    if any(re.search(rf"(?<![\w.]){re.escape(p)}\b", bare) for p in params):
        return None
    return result
