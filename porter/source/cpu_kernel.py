"""The CPU kernel of a DispatchStub and the scalar lambda it runs, read from `native/cpu/*.cpp`."""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, line_of, matching_close, split_top_level
from porter.source.native_definitions import ITER_STUB_CALL_RE, definitions as _definitions, runs_parameter

LAMBDA_CALL_RE = re.compile(r"\bcpu_kernel(?:_vec)?\s*\(")
# Meta functions that build a float op: integer inputs give float outputs.
FLOAT_META_RE = re.compile(r"CREATE_UNARY_FLOAT_META_FUNC\(\s*(\w+)\s*\)|"
                           r"TORCH_META_FUNC\((\w+)\)[^{]*\{[^}]*build_borrowing_(?:unary|binary)_float_op")


def float_meta_ops(text: str) -> set[str]:
    """Ops of a .cpp whose meta function builds a float op."""
    return {a or b for a, b in FLOAT_META_RE.findall(text)}


class ScalarLambda(NamedTuple):
    params: tuple[str, ...]      # parameter names, e.g. ("a", "b")
    param_types: tuple[str, ...]
    return_type: str | None      # "scalar_t", "bool" or None when not written
    body: str                    # the statements between the braces
    path: str
    line: int
    dispatch: str = "all"        # the dispatch case around it: integral, floating or all
    integral: "ScalarLambda | None" = None   # the integer case's own lambda, when it has one
    alternatives: int = 0        # other cpu_kernel calls in the same kernel function
    locals: tuple[str, ...] = ()     # variables the kernel function declares (captured scalars)
    # the kernel function's declarations in scope at the lambda, in order (`const scalar_t
    # three(3)`, `auto lambd_val = lambd.to<scalar_t>()`): what a lambda body may read
    context: tuple["Local", ...] = ()
    kernel_params: tuple[str, ...] = ()   # the kernel function's parameters after the iterator
    complex_case: "ScalarLambda | None" = None   # the complex dtypes' own lambda, when it has one
    dispatch_at: int = -1        # offset of the AT_DISPATCH_* call around it (-1: none)
    # the dispatch around it takes complex dtypes too (AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES):
    # this one lambda is what the CPU computes for complex values (acosh's `std::acosh(a)`)
    covers_complex: bool = False
    at: int = -1                 # offset of the lambda in its file
    # logit's `if (eps < 0) { lambda } else { other lambda }`: the condition on the kernel's
    # scalars under which this lambda runs, and the lambda that runs otherwise
    choice: "Choice | None" = None

    @property
    def expression(self) -> str | None:
        """The returned expression when the body is a single `return EXPR;`."""
        m = re.fullmatch(r"\s*return\s+(.*?);\s*", self.body, re.S)
        return " ".join(m.group(1).split()) if m else None


class Choice(NamedTuple):
    """`if (condition) { this lambda } else { otherwise }` in a kernel function: the condition
    reads only the kernel's scalars and the locals visible at the `if` (`context`)."""
    condition: str
    context: tuple["Local", ...]
    otherwise: "ScalarLambda"


class Local(NamedTuple):
    """A variable the kernel function declares: `const scalar_t three(3)` is
    Local("const scalar_t", "three", "3")."""
    type: str
    name: str
    init: str


def find_kernel_function(checkout: co.Checkout, stub: str) -> tuple[str, str, int] | None:
    """(path, function name, line) of the CPU kernel registered for `stub`."""
    # REGISTER_DISPATCH, or the per-ISA forms upstream's cpu/ files use as well
    pattern = re.compile(rf"\b(?:ALSO_REGISTER_AVX512_|REGISTER_ARCH_|REGISTER_)DISPATCH\(\s*{re.escape(stub)}"
                         rf"\s*,\s*&?\s*([\w:]+)\s*\)")
    for rel in checkout.glob(co.CPU_KERNELS, "*.cpp"):
        text = checkout.read(rel)
        if stub not in text:
            continue
        m = pattern.search(text)
        if m:
            return rel, m.group(1).split("::")[-1], line_of(text, m.start())
    return None


def _kernel_body(checkout: co.Checkout, stub: str) -> tuple[str, str, str, int, int, str] | None:
    """(path, text, code mask, body start, closing brace, parameter list) of the CPU kernel
    function that `stub` registers, if porter can find its definition."""
    found = find_kernel_function(checkout, stub)
    if not found:
        return None
    rel, fn, _ = found
    text = checkout.read(rel)
    mask = code_mask(text)
    m = re.search(rf"^[ \t]*(?:static\s+)?(?:inline\s+)?void\s+{re.escape(fn)}\s*\(([^)]*)\)\s*\{{", mask, re.M)
    if not m:
        return None
    return rel, text, mask, m.end(), matching_close(mask, m.end() - 1), m.group(1)


def scalar_lambda(checkout: co.Checkout, stub: str, op: str | None = None) -> ScalarLambda | None:
    """The generic (`scalar_t`) lambda of the CPU kernel of `stub`, if porter can find one; for
    `op`, folded to one tensor argument where op's meta function hands the kernel one tensor
    twice (threshold's iterator reads `self` as both of its lambda's arguments)."""
    lam = _scalar_lambda(checkout, stub)
    if lam is not None and op is not None and len(lam.params) == 2 and repeats_its_input(checkout, op):
        lam = _folded(lam)
        if lam.integral is not None and len(lam.integral.params) == 2:
            lam = lam._replace(integral=_folded(lam.integral))
    return lam


def _folded(lam: ScalarLambda) -> ScalarLambda:
    """The lambda of two arguments as one of one, its second argument read as its first."""
    first, second = lam.params
    body = re.sub(rf"(?<![\w.:]){re.escape(second)}\b", first, lam.body)
    return lam._replace(params=(first,), param_types=lam.param_types[:1], body=body)


def repeats_its_input(checkout: co.Checkout, op: str) -> bool:
    """Whether `TORCH_META_FUNC(op)` builds its iterator with one tensor as both inputs
    (`.add_const_input(self).add_const_input(self)`)."""
    head = re.compile(rf"TORCH_META_FUNC\(\s*{re.escape(op)}\s*\)")
    for rel in checkout.glob(co.NATIVE, "*.cpp"):
        text = checkout.read(rel)
        m = head.search(text)
        if not m:
            continue
        mask = code_mask(text)
        open_at = mask.find("{", m.end())
        end = matching_close(mask, open_at) if open_at >= 0 else -1
        inputs = re.findall(r"\.add_(?:const_|owned_)?input\(\s*(\w+)\s*\)", mask[open_at:end])
        return len(inputs) == 2 and inputs[0] == inputs[1]
    return False


def _scalar_lambda(checkout: co.Checkout, stub: str) -> ScalarLambda | None:
    body = _kernel_body(checkout, stub)
    if body is None:
        return None
    rel, text, mask, body_start, body_end, _ = body
    params = tuple(p.split("=")[0].split()[-1].lstrip("&*")
                   for p in split_top_level(body[5])[1:] if p.split())
    candidates = []
    for call in LAMBDA_CALL_RE.finditer(mask, body_start, body_end):
        lam = _lambda_after(text, mask, call.end(), rel)
        if lam:
            candidates.append(lam._replace(context=visible_locals(text, mask, body_start, call.start()),
                                           kernel_params=params))
    for copy in DIRECT_COPY_RE.finditer(mask, body_start, body_end):
        # a dtype case that copies its input (conj's real types): the identity, as a lambda
        case, at = _dispatch_case(mask, copy.start())
        candidates.append(ScalarLambda(("a",), ("scalar_t",), "scalar_t", " return a; ", rel,
                                       line_of(text, copy.start()), case, dispatch_at=at))
    candidates.sort(key=lambda c: c.line)
    # a complex case of its own (`AT_DISPATCH_COMPLEX_TYPES`, `isComplexType(...)`) is the
    # complex overload's, never the real dtypes' lambda
    complex_case = next((c for c in candidates if c.dispatch == "complex"), None)
    candidates = [c for c in candidates if c.dispatch != "complex"] or candidates
    generic = [c for c in candidates if any("scalar_t" in t for t in c.param_types)]
    chosen = (generic or candidates or [None])[0]
    if chosen is not None and chosen.dispatch == "integral":
        # `signbit`: an integer case (`c10::is_negative(a)`, wrong for -0.0) and a floating one
        # (`std::signbit(a)`): the floating lambda is the functor's, the integer one its
        # integer overload's
        floating = next((c for c in generic if c.dispatch == "floating"), None)
        if floating is not None:
            chosen = floating._replace(integral=chosen)
    elif chosen is not None and chosen.dispatch == "floating" and chosen.integral is None:
        # threshold's reduced-float case (`float(x) <= threshold`) comes first; its integers
        # run the other branch's lambda (`x <= threshold`, no trip through a float)
        for_ints = next((c for c in generic if c.dispatch in ("all", "integral")
                         and c.dispatch_at != chosen.dispatch_at), None)
        if for_ints is not None:
            chosen = chosen._replace(integral=for_ints._replace(
                context=for_ints.context, kernel_params=for_ints.kernel_params))
    if chosen is None:
        return None
    declared = tuple(dict.fromkeys(LOCAL_RE.findall(mask, body_start, body_end)))
    # lambdas under the same AT_DISPATCH call are chosen between by the kernel's scalars
    # (logit's `eps < 0`); one per dtype branch (hardsigmoid's reduced-float branch) is not
    same_case = [c for c in (generic or candidates) if c.dispatch == chosen.dispatch
                 and c.dispatch_at == chosen.dispatch_at and not _same_formula(c, chosen)]
    if complex_case is chosen:
        complex_case = None
    choice = None
    if len(same_case) == 1:
        choice = _scalar_choice(text, mask, body_start, body_end, chosen, same_case[0], set(params))
    return chosen._replace(alternatives=len(same_case), locals=declared, complex_case=complex_case,
                           choice=choice)


IF_RE = re.compile(r"\bif\s*\(")
# what a condition on scalars may read besides the kernel's parameters and locals
CONDITION_WORDS = {"scalar_t", "opmath_t", "float", "double", "static_cast", "true", "false"}


def _scalar_choice(text: str, mask: str, body_start: int, body_end: int, chosen: ScalarLambda,
                   other: ScalarLambda, readable: set[str]) -> Choice | None:
    """The innermost `if (COND) { ... chosen ... } else { ... other ... }` of the kernel function,
    where COND reads only its scalar parameters and locals (logit's `eps < 0`); None when the two
    lambdas are chosen otherwise (by dtype, by an `else if` of a third branch, by the iterator)."""
    found = None
    for m in IF_RE.finditer(mask, body_start, body_end):
        close_paren = matching_close(mask, m.end() - 1)
        then_open = _next_brace(mask, close_paren + 1)
        if then_open < 0:
            continue
        then_close = matching_close(mask, then_open)
        if not then_open < chosen.at < then_close:
            continue
        rest = re.match(r"\s*else\s*\{", mask[then_close + 1:])
        if rest is None:
            continue
        else_open = then_close + rest.end()
        if not else_open < other.at < matching_close(mask, else_open):
            continue
        found = (m.start(), text[m.end():close_paren])        # later ones are inner ones
    if found is None:
        return None
    at, condition = found
    condition = " ".join(condition.split())
    context = visible_locals(text, mask, body_start, at)
    inits = {local.name: local.init for local in context}
    # the condition and the locals it reads, down to the kernel's parameters: a local read from
    # the iterator (`iter.is_contiguous()`) makes it a choice by the tensors, not the scalars
    frontier, seen = [condition], set()
    while frontier:
        words = set(re.findall(r"(?<![\w.:])([A-Za-z_]\w*)", code_mask(frontier.pop())))
        if words - readable - set(inits) - CONDITION_WORDS:
            return None
        for word in words & set(inits) - seen:
            seen.add(word)
            frontier.append(inits[word])
    return Choice(condition, context, other)


def _next_brace(mask: str, at: int) -> int:
    """Offset of the `{` right after `at` (whitespace between), or -1."""
    m = re.match(r"\s*\{", mask[at:])
    return at + m.end() - 1 if m else -1


def _same_formula(a: ScalarLambda, b: ScalarLambda) -> bool:
    """The same lambda, or one of a `isReducedFloatingType` branch that computes what the other
    computes (hardsigmoid: `float` constants in one branch, `scalar_t` ones in the other)."""
    if a is b:
        return True
    words = lambda lam: " ".join(re.sub(r"\b(?:float|scalar_t|opmath_t)\b", "T", lam.body).split())
    return a.params == b.params and words(a) == words(b)


DIRECT_COPY_RE = re.compile(r"\bdirect_copy_kernel\(\s*\w+\s*\)\s*;")


# A declaration statement of a kernel function: `const scalar_t three(3.0f);`,
# `auto lambd_val = lambd.to<scalar_t>();`, `opmath_t beta{beta_.to<opmath_t>()};`. Vectorized
# values (`Vec`, `Vectorized<float>`) are the vectorized lambda's and never read here.
DECLARATION_RE = re.compile(
    r"(?<![\w.>])((?:(?:const|constexpr|static)\s+)*"
    r"(?:scalar_t|opmath_t|value_t|acc_t|float|double|auto|int64_t|int|bool|(?:at::)?opmath_type<\s*\w+\s*>))"
    r"\s+(\w+)\s*(?:=\s*([^;]*?)|\(([^;]*)\)|\{([^;]*)\})\s*;")


def visible_locals(text: str, mask: str, body_start: int, at: int) -> tuple[Local, ...]:
    """The declarations of a kernel function (from `body_start`, just inside its brace) whose
    scope holds offset `at`, in source order: a declaration in a branch the lambda is not in
    (hardsigmoid's `float three` of its reduced-float branch) is not visible."""
    # the open braces enclosing each offset, by a scan of the body up to `at`
    found = []
    stack = [body_start - 1]
    events = sorted([(m.start(), "brace", m.group()) for m in re.finditer(r"[{}]", mask[:at])
                     if m.start() >= body_start] +
                    [(m.start(), "decl", m) for m in DECLARATION_RE.finditer(mask, body_start, at)])
    scope_of = []
    for offset, kind, what in events:
        if kind == "brace":
            if what == "{":
                stack.append(offset)
            elif len(stack) > 1:
                stack.pop()
        else:
            scope_of.append((what, tuple(stack)))
    open_now = set(stack)
    for m, scopes in scope_of:
        if scopes[-1] not in open_now:
            continue
        preceding = mask[:m.start()].rstrip()[-1:]
        if preceding not in ("", ";", "{", "}", ")"):
            continue        # a parameter or a cast, not a statement
        init = next(g for g in m.group(3, 4, 5) if g is not None)
        start = m.start(3) if m.group(3) is not None else (m.start(4) if m.group(4) is not None else m.start(5))
        init = " ".join(text[start:start + len(init)].split())
        found.append(Local(" ".join(m.group(1).split()), m.group(2), init))
    return tuple(found)


# `const scalar_t eps = ...;`, `auto lo = ...;`: what a lambda of the kernel can capture
LOCAL_RE = re.compile(r"\b(?:auto|scalar_t|opmath_t|float|double|int64_t|bool|\w+_t)\s*&?\s+(\w+)\s*[=({]")


def _lambda_after(text: str, mask: str, start: int, rel: str) -> ScalarLambda | None:
    m = re.compile(r"\[[^\]]*\]\s*\(([^)]*)\)\s*(?:->\s*([\w:]+)\s*)?\{").search(mask, start)
    if not m:
        return None
    close = matching_close(mask, m.end() - 1)
    params, types = [], []
    for p in split_top_level(m.group(1)):
        words = p.replace("const", "").split()
        if len(words) < 2:
            return None
        types.append(" ".join(words[:-1]))
        params.append(words[-1])
    case, at = _dispatch_case(mask, start)
    return ScalarLambda(tuple(params), tuple(types), m.group(2), text[m.end():close],
                        rel, line_of(text, m.start()), case, dispatch_at=at, at=m.start(),
                        covers_complex=_dispatches_complex(mask, at))


DISPATCH_NAME_RE = re.compile(r"\bAT_DISPATCH_\w+")


def _dispatch_case(mask: str, at: int) -> tuple[str, int]:
    """Which dtypes the innermost AT_DISPATCH_* enclosing `at` covers (integral, floating,
    complex or all; a dispatch before `at` that closes before it is another branch's), and
    where that dispatch starts (-1: none)."""
    found = [m for m in DISPATCH_NAME_RE.finditer(mask, max(0, at - 4000), at)]
    for m in reversed(found):
        open_at = mask.find("(", m.end())
        if open_at < 0 or open_at > at:
            continue
        close = matching_close(mask, open_at)
        if 0 <= close < at:
            continue
        return _case_of(m.group()), m.start()
    return "all", -1


def _dispatches_complex(mask: str, at: int) -> bool:
    """Whether the AT_DISPATCH_* call at `at` takes complex dtypes: by its name, or for
    AT_DISPATCH_V2 by the type groups it lists after its lambda."""
    m = DISPATCH_NAME_RE.match(mask, at) if at >= 0 else None
    if m is None:
        return False
    if m.group() != "AT_DISPATCH_V2":
        return "COMPLEX" in m.group()
    open_at = mask.find("(", m.end())
    close = matching_close(mask, open_at) if open_at >= 0 else -1
    return close > 0 and "COMPLEX" in mask[open_at:close]


def _case_of(name: str) -> str:
    if name in ("AT_DISPATCH_SWITCH",):
        return "all"
    if "COMPLEX" in name and not any(w in name for w in ("FLOATING_AND_COMPLEX", "ALL_TYPES",
                                                          "INTEGRAL", "FLOATING_TYPES")):
        return "complex"        # AT_DISPATCH_COMPLEX_TYPES(...), AT_DISPATCH_CASE_COMPLEX_TYPES
    integral = "INTEGRAL" in name
    floating = "FLOATING" in name or "REDUCED" in name
    if "ALL_TYPES" in name or integral == floating:
        return "all"
    return "integral" if integral else "floating"


def stub_parameter_names(checkout: co.Checkout, stub: str) -> list[str]:
    """A name for each parameter of `stub` after the iterator: as the op the stub is named
    after passes them (threshold_out: `threshold_stub(device_type(), *this, threshold, value)`),
    else the CPU kernel function's own (`value_scalar` -> `value`); [] when neither is found."""
    from porter.source import stub_route
    namesake = stub.removesuffix("_stub")
    for route in stub_route.routes(checkout, f"{namesake}_out"):
        if route.stub == stub and all(re.fullmatch(r"[A-Za-z_]\w*", a) for a in route.arguments):
            return list(route.arguments)
    found = _kernel_body(checkout, stub)
    if found is None:
        return []
    return [p.split("=")[0].split()[-1].lstrip("&*").removesuffix("_scalar").removesuffix("_")
            for p in split_top_level(found[5])[1:] if p.split()]


def meta_promotes_to_float(checkout: co.Checkout, op: str) -> bool:
    """Whether the op's meta function builds a float op (integer inputs give float outputs)."""
    return any(op in text and op in float_meta_ops(text)
               for text in map(checkout.read, checkout.glob(co.NATIVE, "*.cpp")))


DISPATCH_RE = re.compile(r"\bAT_DISPATCH_(\w+?)(?:_AND\d*)?\s*\(")


def dispatches_floating_only(checkout: co.Checkout, stub: str) -> tuple[str, int] | None:
    """(path, line) of the CPU kernel's `AT_DISPATCH_FLOATING_TYPES...` when every dispatch in
    it covers floating types only (integer inputs raise on CPU), else None."""
    body = _kernel_body(checkout, stub)
    if body is None:
        return None
    rel, text, mask, body_start, body_end, _ = body
    calls = list(DISPATCH_RE.finditer(mask, body_start, body_end))
    if calls and all(c.group(1).startswith(("FLOATING_TYPES", "REDUCED_FLOATING_TYPES",
                                            "FLOATING_AND_COMPLEX_TYPES", "COMPLEX_TYPES"))
                     for c in calls):
        return rel, line_of(text, calls[0].start())
    return None


VALUE_OR_RE = re.compile(r"\b(\w+)\.value_or\(\s*([-+0-9.eEf]+)\s*\)")
LIMIT_RE = re.compile(r"\b(\w+)\.has_value\(\)\s*\?[^:;]*:\s*std::numeric_limits<\w+>::(max|lowest)\(\)")


def none_conventions(checkout: co.Checkout, stub: str) -> list[str | None] | None:
    """What the CPU kernel of `stub` uses for each optional parameter left None, in parameter
    order after the iterator: a number (`nan.value_or(0.)` -> "0."), "max" or "lowest"
    (`pos_inf.has_value() ? ... : std::numeric_limits<scalar_t>::max()`), or None when it says
    nothing porter reads. None when the kernel function is not found."""
    found = _kernel_body(checkout, stub)
    if found is None:
        return None
    _, text, _, body_start, body_end, params = found
    body = text[body_start:body_end]
    names = [p.split("=")[0].split()[-1] for p in split_top_level(params)[1:] if p.split()]
    conventions: dict[str, str] = {}
    for name, value in VALUE_OR_RE.findall(body):
        conventions.setdefault(name, value.rstrip("f"))
    for name, limit in LIMIT_RE.findall(" ".join(body.split())):
        conventions.setdefault(name, limit)
    return [conventions.get(n) for n in names]


def shared_function_stubs(checkout: co.Checkout, entry) -> list[str]:
    """Stubs the plain (not structured) function CPU and CUDA share runs on a TensorIterator it
    builds: `Tensor& logit_out(...) { auto iter = ...; logit_stub(iter.device_type(), iter, ...); }`,
    or hands to a helper of its file that does (`logical_and_out` calls
    `comparison_op_out(result, self, other, logical_and_stub)`, whose body builds the iterator
    and runs `stub(iter.device_type(), iter)`)."""
    kernels = {d.kernel for d in entry.dense_rows()}
    if len(kernels) != 1:
        return []
    function = kernels.pop()
    for rel in sorted(checkout.glob(co.NATIVE, "*.cpp")):
        text = checkout.read(rel)
        if function not in text:
            continue
        mask = code_mask(text)
        for params, body in _definitions(mask, function):
            found = _stubs_run_on_iterator(body)
            if found:
                return found
            for helper, stub in HELPER_CALL_RE.findall(body):
                if runs_parameter(mask, helper):
                    return [stub]
    return []


# `helper(..., name_stub)`, `helper(result, self, logit_stub, Scalar(...))`: a stub handed to a
# helper, last or followed by what the helper passes on to it (upstream's
# `unary_op_impl_float_out(result, self, stub, args...)`)
HELPER_CALL_RE = re.compile(r"\b(\w+)\s*\([^;{}]*?\b(\w+_stub)\s*[,)]")


def _stubs_run_on_iterator(body: str) -> list[str]:
    found = [name for name in ITER_STUB_CALL_RE.findall(body) if name.endswith("_stub")]
    return list(dict.fromkeys(found)) if found and "TensorIterator" in body else []


class EnumBranch(NamedTuple):
    """One side of `if (approximate == GeluType::Tanh) {...} else {...}` in a CPU kernel: the
    enumerator it runs for (None: the `else`, every other value) and its scalar function."""
    enumerator: str | None
    lam: ScalarLambda


ENUM_IF_RE = re.compile(r"\bif\s*\(\s*(\w+)\s*(==|!=)\s*([\w:]+)\s*\)\s*\{")


def enum_branches(checkout: co.Checkout, stub: str) -> tuple[str, tuple[EnumBranch, ...]] | str:
    """(the enum parameter, its two branches) of the CPU kernel of `stub` when its body is
    `if (P == Enum::X) { ...cpu_kernel... } else { ...cpu_kernel... }` on a parameter P (gelu's
    GeluKernelImpl): each branch's scalar function is its lambda, or the function template it
    names (`scalar_gelu<scalar_t>`, from the checkout's cpu/*.h), the reduced-float case first
    (it computes at float, as a Metal functor does for half and bfloat). Else why not, a string."""
    body = _kernel_body(checkout, stub)
    if body is None:
        return f"no CPU kernel registered for {stub} in {co.CPU_KERNELS}/*.cpp"
    rel, text, mask, start, end, params = body
    names = [p.split("=")[0].split()[-1].lstrip("&*") for p in split_top_level(params)[1:] if p.split()]
    where = f"{rel}:{line_of(text, start)}"
    m = next((m for m in ENUM_IF_RE.finditer(mask, start, end) if m.group(1) in names), None)
    if m is None:
        return (f"its CPU kernel ({where}) does not branch on its parameter "
                f"({', '.join(names) or 'none'}) as `if (P == Enum::X) {{...}} else {{...}}`")
    then_close = matching_close(mask, m.end() - 1)
    rest = re.match(r"\s*else\s*\{", mask[then_close + 1:])
    if rest is None:
        return f"the `if` of its CPU kernel ({rel}:{line_of(text, m.start())}) has no `else`"
    else_open = then_close + rest.end()
    else_close = matching_close(mask, else_open)
    sides = []
    for lo, hi in ((m.end(), then_close), (else_open + 1, else_close)):
        lam = _branch_function(checkout, rel, text, mask, lo, hi)
        if isinstance(lam, str):
            return lam
        sides.append(lam)
    enumerator = m.group(3)
    first, second = (sides if m.group(2) == "==" else sides[::-1])
    return m.group(1), (EnumBranch(enumerator, first), EnumBranch(None, second))


def _branch_function(checkout, rel, text, mask, lo: int, hi: int) -> ScalarLambda | str:
    found = []
    for call in LAMBDA_CALL_RE.finditer(mask, lo, hi):
        close = matching_close(mask, call.end() - 1)
        args = split_top_level(mask[call.end():close])
        if len(args) < 2:
            continue
        at = call.end() + len(args[0]) + 1
        at += len(args[1]) - len(args[1].lstrip())
        if args[1].lstrip().startswith("["):
            lam = _lambda_after(text, mask, at, rel)
        else:
            lam = _named_scalar_function(checkout, args[1].strip(), rel, text, mask, at)
        if isinstance(lam, str):
            return lam
        if lam is not None:
            found.append(lam)
    if not found:
        return f"no scalar function in a cpu_kernel call of {rel}:{line_of(text, lo)}"
    # the reduced-float case (its lambda computes at float) first
    reduced = [lam for lam in found if lam.dispatch_at >= 0
               and mask.startswith("AT_DISPATCH_REDUCED", lam.dispatch_at)]
    return (reduced or found)[0]


TEMPLATE_FN_RE = r"template\s*<\s*typename\s+(\w+)\s*>\s*(?:inline\s+)?(\w+)\s+{name}\s*\(\s*(?:const\s+)?(\w+)\s+(\w+)\s*\)\s*\{{"
CONSTEXPR_RE = re.compile(r"\bconstexpr\s+(?:double|float)\s+(\w+)\s*=\s*([^;]+);")
OPMATH_ALIAS_RE = re.compile(r"\busing\s+opmath_t\s*=[^;]*;")


def _named_scalar_function(checkout, arg: str, rel, text, mask, at: int) -> ScalarLambda | str | None:
    """`scalar_gelu<scalar_t>`: the function template's body, read from the checkout's
    cpu/*.h, as a lambda of `scalar_t` (its `reduced_fp_to_float(x)` the float it is, its
    header's constexpr constants written out)."""
    m = re.fullmatch(r"(\w+)\s*<\s*scalar_t\s*>", arg)
    if m is None:
        return None
    name = m.group(1)
    head = re.compile(TEMPLATE_FN_RE.format(name=re.escape(name)))
    found = checkout.first_definition(co.CPU_KERNELS, "*.h", name, head)
    if found is None:
        return (f"{name}, which {rel}:{line_of(text, at)} passes to cpu_kernel, is defined in no "
                f"{co.CPU_KERNELS}/*.h of this checkout")
    header, source, hmask, h = found
    tparam, param = h.group(1), h.group(4)
    if h.group(2) != tparam or h.group(3) != tparam:
        return f"{name} ({header}:{line_of(source, h.start())}) is not a function of one {tparam}"
    close = matching_close(hmask, h.end() - 1)
    fn_body = OPMATH_ALIAS_RE.sub("", source[h.end():close])
    fn_body = re.sub(r"\breduced_fp_to_float\s*\(", "opmath_t(", fn_body)
    fn_body = re.sub(rf"\b{tparam}\b", "scalar_t", fn_body)
    for const, value in CONSTEXPR_RE.findall(hmask[:h.start()]):
        init = source[hmask.index(value, hmask.index(const)):][:len(value)]
        init = " ".join(init.split())
        spelled = init if re.fullmatch(r"[\w.]+", init) else f"({init})"
        fn_body = re.sub(rf"\b{re.escape(const)}\b", spelled, fn_body)
    case, dispatch_at = _dispatch_case(mask, at)
    return ScalarLambda((param,), ("scalar_t",), "scalar_t", fn_body, header,
                        line_of(source, h.start()), case, dispatch_at=dispatch_at, at=at)
