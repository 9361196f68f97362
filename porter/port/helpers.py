"""CPU helpers a lambda calls (`calc_ndtri`, `laguerre_polynomial_l_forward` in native/Math.h),
as Metal functions for c10/metal/special_math.h, where upstream keeps such helpers (`xlogy`,
the Chebyshev polynomials).

The translation keeps the algorithm: same statements, same constants, computed in the type the
functor calls it with (float for floating inputs: float opmath, Metal has no double). It reuses
the lambda translation's tables (porter.port.body) for the math it calls; a helper the helper
calls is translated the same way, first. What Metal lacks (a type it has no counterpart of, a
function porter cannot map) refuses the helper by name.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, matching_close

SPECIAL_MATH = f"{co.C10_METAL}/special_math.h"
# where the CPU keeps the helpers its kernels call
HELPER_HEADERS = (f"{co.NATIVE}/Math.h",)
# words a helper body may use besides its names: C++ that Metal shares
STATEMENT_WORDS = ("for", "while", "do", "break", "continue", "long", "int", "size_t", "uint", "uchar",
                   "constexpr", "static_cast", "true", "false")
# CPU spellings Metal has no counterpart of: the helper is refused, naming them
UNSUPPORTED_RE = re.compile(r"\b(?:std::complex|c10::complex|std::vector|std::array|throw|goto|"
                            r"TORCH_CHECK|printf|std::tuple|std::pair|malloc)\b")


class Translated(NamedTuple):
    name: str           # the CPU name, which the Metal function keeps
    text: str           # the Metal source of its definitions


class Refused(Exception):
    """A helper whose translation needs what Metal lacks."""


def definitions(text: str, name: str) -> list[str]:
    """The definitions of function `name` in a header's text, each from its `template` line (or
    its return type) to its closing brace."""
    mask = code_mask(text)
    found = []
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", mask):
        close = matching_close(mask, m.end() - 1)
        if close < 0:
            continue
        after = mask[close + 1:close + 120]
        brace = re.match(r"\s*(?:__ubsan_ignore\w*__\s*)?(?:const\s*)?\{", after)
        if not brace:
            continue
        start = max(mask.rfind(";", 0, m.start()), mask.rfind("}", 0, m.start()),
                    mask.rfind("*/", 0, m.start()) + 1, mask.rfind("#", 0, m.start()))
        start = text.index("\n", start) + 1 if "\n" in text[start:m.start()] else start + 1
        open_at = close + 1 + brace.end() - 1
        end = matching_close(mask, open_at)
        if end < 0:
            continue
        found.append(_strip_comments(text[start:end + 1]).strip())
    return found


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


# overloads for vectors or complex values: the functor's real overloads never call them
OTHER_OVERLOAD_RE = re.compile(r"\bVectorized\b|\bvec::|\bc10::complex\b|\bstd::complex\b|\b__m\d+")


def find(checkout: co.Checkout, name: str) -> list[str]:
    """The real-valued definitions of helper `name`: in native/Math.h, else in a CPU kernel file
    (UnaryOpsKernel.cpp's `_nan_to_num_replace`)."""
    sources = [rel for rel in HELPER_HEADERS if checkout.exists(rel)]
    sources += sorted(checkout.glob(co.CPU_KERNELS, "*.cpp"))
    for rel in sources:
        found = definitions(checkout.read(rel), name)
        if found:
            return [d for d in found if not OTHER_OVERLOAD_RE.search(d[:d.index("{")])]
    return []


class Library:
    """What a functor body may call: the checkout's c10/metal routines (calling the library
    returns their names, as `porter.port.body.translate` asks), and the CPU helpers translated
    for it on demand (`helper`), kept in `added` in the order c10/metal must define them."""

    def __init__(self, checkout: co.Checkout, c10_functions):
        self.checkout = checkout
        self._c10 = c10_functions
        self.added: dict[str, Translated] = {}
        self.refused: dict[str, str] = {}
        # float2 routines of <complex> porter writes into c10/metal/utils.h (porter.port.complex_helpers)
        self.complex_added: list[str] = []

    def __call__(self):
        return self._c10()

    def helper(self, name: str) -> str | None:
        """The Metal spelling of a call to CPU helper `name` (its translation recorded in
        `added`), or None with the reason in `refused[name]`."""
        if name in self.added:
            return f"c10::metal::{name}"
        if name in self.refused:
            return None
        if not self.checkout.exists(SPECIAL_MATH):
            self.refused[name] = f"the checkout has no {SPECIAL_MATH} to define it in"
            return None
        try:
            self._translate(name, ())
        except Refused as why:
            self.refused[name] = str(why)
            return None
        return f"c10::metal::{name}"

    def complex_routine(self, name: str) -> bool:
        """Whether porter writes c10::metal routine `name` for float2 (recorded in
        `complex_added`), else False with the reason in `refused[name]`."""
        from porter.port import complex_helpers

        if name in self.complex_added:
            return True
        if not complex_helpers.writes(name):
            self.refused[name] = f"porter has no float2 `{name}` of its own to add to c10/metal"
            return False
        if not self.checkout.exists(complex_helpers.UTILS):
            self.refused[name] = f"the checkout has no {complex_helpers.UTILS} to define it in"
            return False
        self.complex_added.append(name)
        return True

    def _translate(self, name: str, stack: tuple[str, ...]) -> None:
        if name in self.added:
            return
        if name in stack:
            raise Refused(f"`{name}` calls itself (Metal has no recursion)")
        found = find(self.checkout, name)
        if not found:
            raise Refused(f"`{name}` has no real-valued definition in {', '.join(HELPER_HEADERS)} "
                          "or the CPU kernel files")
        if len(found) == 1 and re.search(rf"(?<![\w.:]){re.escape(name)}\s*\(",
                                         found[0][code_mask(found[0]).index("{", found[0].index(name)):]):
            # one definition calling its own name (several overloads call each other instead)
            raise Refused(f"`{name}` calls itself (Metal has no recursion)")
        texts = [self._one(name, d, stack + (name,)) for d in found]
        self.added[name] = Translated(name, "\n\n".join(texts) + "\n")

    def _one(self, name: str, definition: str, stack: tuple[str, ...]) -> str:
        from porter.port import body

        bad = UNSUPPORTED_RE.search(definition)
        if bad:
            raise Refused(f"`{name}` uses {bad.group()}, which Metal has no counterpart of")
        open_at = code_mask(definition).index("{", definition.index(name))
        head, inner = definition[:open_at], definition[open_at + 1:definition.rstrip().rfind("}")]
        head = _metal_head(head)
        params = _param_names(head, name)
        inner = _metal_types(inner)
        # helpers it calls, translated first (c10/metal must define them before it)
        c10 = self._c10()
        for callee in dict.fromkeys(re.findall(r"(?<![\w.:])([A-Za-z_]\w*)\s*\(", inner)):
            if callee == name or callee in body.KEYWORDS or callee in STATEMENT_WORDS \
                    or callee in params or _known_math(callee) or callee in c10:
                continue
            self._translate(callee, stack)
        called_c10 = tuple(n for n in re.findall(r"(?<![\w.:])([A-Za-z_]\w*)\s*\(", inner) if n in c10)
        names = tuple(params) + STATEMENT_WORDS + tuple(self.added) + called_c10 + (name,)
        out = body.translate(inner, names, "T", lambda: c10)
        if out.statements is None:
            raise Refused(f"`{name}`: {out.reason}")
        statements = contract(out.statements)
        return f"{head.strip()} {{\n{_indent(statements)}\n}}"


def contract(code: str) -> str:
    """`(a * b - c)` and `(a * b + c)` as `fma(a, b, -(c))` and `fma(a, b, c)`, in each
    parenthesized group (not a call's arguments) whose top level is exactly those two terms.
    The CPU's compilers contract a product and the sum it feeds within one expression into
    one fused multiply-add (clang's -ffp-contract=on on a Mac, GCC's default on x86), so the
    CPU's recurrence `(((k + k) + (1 - x)) * q - k * p)` rounds once where an unfused kernel
    rounds twice: laguerre_polynomial_l(55, 210) lost 1e-5 of its value against the CPU's.
    An explicit fma rounds as the CPU does on every Metal compiler."""
    mask = code_mask(code)
    out, at = [], 0
    i = 0
    while i < len(code):
        if mask[i] == "(" and not re.search(r"[\w\]>]\s*$", mask[:i]):
            close = matching_close(mask, i)
            if close < 0:
                break
            fused = _fused(code[i + 1:close], mask[i + 1:close])
            if fused is not None:
                out += [code[at:i], "(", fused, ")"]
                at = i = close + 1
                continue
        i += 1
    return "".join(out) + code[at:]


def _top_level(mask: str, chars: str) -> list[int]:
    """Offsets of binary operators in `chars` at depth 0 of `mask` (a '-' or '+' that follows
    an operand; not an exponent's sign)."""
    found, depth = [], 0
    for j, c in enumerate(mask):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c in chars:
            before = mask[:j].rstrip()
            if c in "+-" and (not before or not re.search(r"[\w)\]]$", before)
                              or re.search(r"(?<![\w.])\d+\.?\d*[eE]$", before)):
                continue        # a sign, not an operator
            found.append(j)
    return found


def _fused(text: str, mask: str) -> str | None:
    terms = _top_level(mask, "+-")
    if len(terms) != 1 or _top_level(mask, "?:<>=&|!,"):
        return None
    split = terms[0]
    first, second = text[:split].strip(), text[split + 1:].strip()
    products = _top_level(mask[:split], "*/%")
    if not products or mask[products[-1]] != "*":
        return None
    last = products[-1]
    a, b = text[:last].strip(), text[last + 1:split].strip()
    if not a or not b or not second or not first:
        return None
    addend = f"-({second})" if text[split] == "-" else second
    return f"fma({a}, {b}, {addend})"


def _known_math(name: str) -> bool:
    from porter.port import body
    plain = name.rsplit("::", 1)[-1]
    return plain in body.PRECISE or plain in body.METAL or name in body.NAN_KEEPING


def _metal_head(head: str) -> str:
    """A CPU helper's template line and signature, as Metal writes them."""
    head = re.sub(r"\b(?:C10_HOST_DEVICE|C10_ALWAYS_INLINE|C10_API|static|__ubsan_ignore\w*__)\b", "", head)
    head = re.sub(r",\s*bool\s+\w+\s*=\s*\w+\s*>", ">", head)      # `bool is_cuda=false`: CPU only
    head = re.sub(r"\bscalar_t\b", "T", head)        # the body's scalar_t is T too (body.translate)
    head = _metal_types(head)
    head = " ".join(head.split())
    if "inline" not in head:
        head = re.sub(r"^(template\s*<[^>]*>\s*)?", lambda m: (m.group(0) or "") + "inline ", head, count=1)
    head = re.sub(r"template\s*<", "template <", head)
    return head.replace("> inline", ">\ninline")


def _metal_types(text: str) -> str:
    text = re.sub(r"\bint64_t\b", "long", text)
    text = re.sub(r"\bint32_t\b", "int", text)
    text = re.sub(r"\buint8_t\b", "uchar", text)
    text = re.sub(r"\bsize_t\b", "int", text)            # as c10/metal's chbevl takes its length
    text = re.sub(r"\bdouble\b", "float", text)           # float opmath: Metal has no double
    text = re.sub(r"\bstatic\s+const\b", "constexpr", text)
    text = re.sub(r"\bstatic\s+constexpr\b", "constexpr", text)
    text = re.sub(r"\bstd::numeric_limits<T>::", "std::numeric_limits<scalar_t>::", text)
    return text


def _param_names(head: str, name: str) -> list[str]:
    params = head[head.index(name) + len(name):]
    params = params[params.index("(") + 1:params.rindex(")")]
    out = []
    for p in params.split(","):
        m = re.search(r"(\w+)\s*(?:\[\s*\])?\s*$", p.split("=")[0].strip())
        if m:
            out.append(m.group(1))
    return out


def _indent(statements: str) -> str:
    """Two spaces a brace level, at most one blank line in a row (the checkout's clang-format
    has the last word on layout)."""
    lines, depth, blank = [], 1, False
    for line in statements.splitlines():
        line = line.strip()
        if not line:
            if not blank and lines:
                lines.append("")
            blank = True
            continue
        blank = False
        closing = len(line) - len(line.lstrip("}"))
        lines.append("  " * max(depth - closing, 0) + line)
        depth += line.count("{") - line.count("}")
    return "\n".join(lines).rstrip()


def add_to_special_math(text: str, helpers: list[Translated]) -> str:
    """special_math.h with the helpers defined before its namespaces close (each once)."""
    new = [h for h in helpers if not re.search(rf"\b{re.escape(h.name)}\s*\([^;{{}}]*\)\s*\{{", text)]
    if not new:
        return text
    block = "".join(h.text + "\n" for h in new)
    m = re.search(r"^\}\s*//\s*namespace metal\s*$", text, re.M)
    if not m:
        return text.rstrip("\n") + "\n\n" + block
    return text[:m.start()] + block + text[m.start():]
