"""The host code porter models, as a positive list: every statement of a host function (and of
the MPS impl it is reached from) must be one of `HOST_SHAPES` / `IMPL_SHAPES`, or the op is not
proven, whatever the kernel does.

porter runs the Metal kernel the host names, on the operands of the stub's iterator, with the
scalars host_args computes. That is what a Mac runs only when the host does nothing else: a
result negated after the call, a kernel run on another iterator (operands swapped), a parameter
reassigned before the kernel name is picked, all change what a Mac computes while porter's
kernel answers as before. So instead of listing such edits (there is no end to them), this
module lists the statements whose effect porter models, each with why it is safe, and names
the first statement outside the list: "not proven: <file>:<line>: `<statement>` ...".

The list covers what porter writes (templates/*host_kernel.mm.j2, the in-place and stub-impl
bodies, ternary_port's host) and upstream's host functions for elementwise ops (UnaryKernel.mm,
BinaryKernel.mm, ActivationKernel.mm: tests/emulate/test_host_model.py reads them when they are
present). Statements that only raise (TORCH_CHECK) or leave an empty iterator are in the list
explicitly; conditions on the iterator's dtype are read by porter.emulate.host_dtypes, which
says per dtype what a Mac does, or that it is not proven.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.emulate import host_dtypes
from porter.source.cpp_scan import code_mask, line_of, matching_close

# the dtypes an MPS test sends: a condition on the iterator's dtype is read over these
TESTED_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                 "float32", "complex64")
INTEGRAL = {"bool", "uint8", "int8", "int16", "int32", "int64"}

# `lib.exec_binary_kernel(iter, ...)`, `return lib.exec_unary_kernel(...)` (upstream's pow)
# string literals, adjacent ones joined; and their concatenation through std::string
# (porter.source.host_names reads its value: `std::string("heavi") + "side"`)
_LITERALS = r'(?:R"[^"]*"|"(?:[^"\\]|\\.)*"|\s)+'
_CONCATENATED = (rf'(?:std::)?string\s*[({{]\s*{_LITERALS}[)}}](?:\s*\+\s*(?:{_LITERALS}|'
                 rf'(?:std::)?string\s*[({{]\s*{_LITERALS}[)}}]))+')
KERNEL_CALL_RE = re.compile(r"(?:return\s+)?lib\s*\.\s*exec_(?:unary|binary|ternary)_kernel"
                            r"(?:_with_params)?\s*(?:<[^>]*>)?\s*\(\s*(?P<iter>\*?\s*[\w.>-]+)\s*,"
                            rf"\s*(?P<name>{_CONCATENATED}|{_LITERALS}|[^,()]+?)\s*(?:,.*)?\)", re.S)
CHECK_RE = re.compile(r"(?:TORCH_CHECK(?:_TYPE|_VALUE|_NOT_IMPLEMENTED|_INDEX)?|TORCH_INTERNAL_ASSERT)"
                      r"\s*\(.*\)", re.S)
# a warning whose message reads only literals, names and the tensors' plain facts: it cannot
# change a value (review 25's H3: `TORCH_WARN_ONCE("...")` before the call was not proven)
_READ_ONLY_CALL = r"(?:\.|->)\s*(?:dtype|scalar_type|common_dtype|numel|dim|sizes|name)\s*\(\s*\)"
_MESSAGE_PART = (rf'(?:"(?:[^"\\]|\\.)*"|(?:c10::)?toString\s*\(\s*[\w.>:-]+(?:{_READ_ONLY_CALL})?\s*\)|'
                 rf'[\w:]+(?:(?:\.|->|::)\w+)*(?:{_READ_ONLY_CALL})?)')
WARN_RE = re.compile(rf"TORCH_WARN(?:_ONCE)?\s*\(\s*{_MESSAGE_PART}(?:\s*,\s*{_MESSAGE_PART})*\s*\)")
PARAMS_DECL_RE = re.compile(r"(?:[\w:]+::)?\w+\s*<\s*(?:float|int64_t|long|int)\s*>\s+params")
PARAMS_FIELD_RE = re.compile(r"params\s*\.\s*\w+\s*=\s*[^=].*", re.S)
DTYPE_LOCAL_RE = re.compile(r"(?:const\s+)?(?:auto|(?:(?:at|c10)::)?ScalarType)\s+\w+\s*=\s*"
                            + host_dtypes.ITER_DTYPE)
LIMIT_LOCALS_RE = re.compile(r"(?:float|double)\s+\w+\s*=\s*0(?:\.0*)?f?(?:\s*,\s*\w+\s*=\s*0(?:\.0*)?f?)*")
LIMIT_ASSIGN_RE = re.compile(r"\w+\s*=\s*static_cast<float>\(\s*std::numeric_limits<scalar_t>::"
                            r"(?:max|lowest)\(\)\s*\)")
DISPATCH_RE = re.compile(r"AT_DISPATCH_\w+\s*\((?P<args>.*),\s*\[&\]\s*(?:\(\s*\))?\s*\{(?P<body>.*)\}\s*\)", re.S)
# a local holding a kernel name: a literal, a concatenation of literals, or the enum pick
# kernel_pick reads; declared with or without `constexpr`/`const`/`static`, initialized by `=`
# or braces. Writes nothing: which name a call passes is hostmap's and kernel_pick's to read
_NAME_VALUE = (rf'(?:{_CONCATENATED}|{_LITERALS}|\(?\s*[\w:]+\s*(?:==|!=)\s*[\w:]+\s*\)?\s*\?\s*"\w+"'
               r'\s*:\s*"\w+")')
NAME_LOCAL_RE = re.compile(r'(?:static\s+)?(?:constexpr\s+)?(?:const\s+)?'
                           r'(?:char\s*(?:const\s*)?\*\s*(?:const\s+)?|auto\s+|std::string_view\s+|'
                           r'std::string\s+)(?:const\s+)?(?P<name>\w+)\s*(?:\[\s*\]\s*)?'
                           rf'(?:=\s*{_NAME_VALUE}|\{{\s*{_NAME_VALUE}\s*\}}|\(\s*{_NAME_VALUE}\s*\))')
EMPTY_RE = re.compile(r"(?P<it>this\s*->|\w+\s*\.)\s*numel\(\s*\)\s*==\s*0|!\s*(?P<it2>this\s*->|\w+\s*\.)\s*numel\(\s*\)")
STUB_CALL_RE = re.compile(r"\w+\s*\(\s*(?:at::|c10::)?(?:DeviceType::)?kMPS\s*,\s*\*this\s*(?:,.*)?\)", re.S)
RETURN_RE = re.compile(r"return")
# `(void)name;` evaluates a name and discards it (silencing an unused-variable warning): no
# effect on any tensor. Only a bare name: `(void)f(x)` or `(void)(x = y)` would run something.
VOID_NAME_RE = re.compile(r"\(\s*void\s*\)\s*\w+")
ENUM_PICK_RE = re.compile(r"(?P<lhs>[\w:]+)\s*(?:==|!=)\s*(?P<rhs>[\w:]+)")


class Shape(NamedTuple):
    name: str
    why: str           # why porter's run of the kernel is still what a Mac computes


# The host function registered on a stub (REGISTER_DISPATCH(stub, fn)), statement by statement.
HOST_SHAPES = {
    "kernel call": Shape("lib.exec_<kind>_kernel[_with_params](iter, name, ...)",
                         "the call porter emulates, on the stub's own iterator (its operands in "
                         "the order the stub passes them); its name and scalars are read by "
                         "hostmap / host_call / host_args, which say 'not proven' for a form they "
                         "cannot read"),
    "check": Shape("TORCH_CHECK*(cond, ...)", "only raises; host_dtypes evaluates the condition per "
                   "dtype (a Mac's error) or says it is not proven"),
    "warning": Shape("TORCH_WARN[_ONCE](\"...\", name, t.dtype(), ...)", "writes a message of "
                     "literals, names and read-only facts of the tensors: no value changes"),
    "params struct": Shape("Struct<float|int64_t> params;", "declares the struct host_args "
                           "requires every field of to be set in a form it evaluates"),
    "params field": Shape("params.field = expr;", "host_args evaluates expr from the stub's scalars "
                          "and raises HostCodeUnknown for any form it does not model"),
    "dtype local": Shape("const auto dtype = iter.common_dtype();", "reads the iterator's dtype "
                         "for host_dtypes' conditions; writes nothing"),
    "limit locals": Shape("float dtype_max = 0, dtype_lowest = 0;", "locals host_args gives the "
                          "dtype's extremes only through the dispatch below; any other assignment "
                          "to them is a statement outside this list"),
    "limit dispatch": Shape("AT_DISPATCH_*(..., iter.common_dtype(), \"n\", [&]() { x = "
                            "static_cast<float>(std::numeric_limits<scalar_t>::max()); })",
                            "host_dtypes refuses the dtypes it lacks as a Mac does; its body only "
                            "sets the extremes host_args reads"),
    "kernel name": Shape("const char* name = (p == Enum::X) ? \"a\" : \"b\";", "kernel_pick reads "
                         "the kernel each value of the op's str argument runs from exactly this "
                         "line (gelu, pytorch#181451)"),
    "empty return": Shape("if (iter.numel() == 0) return;", "an empty iterator has no element "
                          "whose value could change"),
    "dtype return": Shape("if (<dtype condition>) return;  /  if (<dtype condition>) { ...; return; }",
                          "host_dtypes evaluates the condition per dtype: the dtypes taking it are "
                          "failed (output unwritten) or not proven (other code), the others never "
                          "run the block"),
    "integer params branch": Shape("if (c10::isIntegralType(iter.common_dtype(), true)) { params...; "
                                   "lib.exec_*_kernel_with_params(iter, \"k\", params, \"S_long\"); "
                                   "return; }",
                                   "host_args takes the `_long` call for exactly the dtypes the "
                                   "condition holds for (checked here over every tested dtype)"),
    "dtype kernel branch": Shape("if (<dtype condition>) { kernel call } else { other code }",
                                 "host_dtypes runs the kernel for the dtypes taking the kernel's "
                                 "branch and says 'not proven' for the others (upstream's fmax)"),
    "kernel pick branch": Shape("if (p == Enum::X) { lib.exec_*_kernel(iter, \"a\"); } else { "
                                "lib.exec_*_kernel(iter, \"b\"); }", "kernel_pick reads this if/else "
                                "on the enum parameter the stub passes, as the ternary form"),
    "kernel choice branch": Shape("if (<condition>) { return lib.exec_*_kernel(iter, \"a\"); }",
                                  "only where the function names several kernels, which hostmap "
                                  "already makes 'not proven' (upstream's pow_tensor_scalar)"),
}

# The op's own structured MPS impl (TORCH_IMPL_FUNC(<op>_out_mps)) that runs the kernel or stub.
IMPL_SHAPES = {
    "kernel on *this": Shape("lib.exec_<kind>_kernel(*this, \"k\");", "the impl is the op's "
                             "TensorIterator (structured_inherits), its operands in the meta "
                             "function's order, which the emulator follows"),
    "stub call": Shape("Stub(kMPS, *this, args...);", "runs the registered host function on the "
                       "impl's own iterator; kernel_pick reads the arguments"),
    "check": HOST_SHAPES["check"],
    "empty return": HOST_SHAPES["empty return"],
    "using": Shape("using namespace mps;", "declares nothing that runs"),
}


class Statement(NamedTuple):
    start: int
    end: int
    text: str                        # whitespace-joined, from the live text
    condition: str | None = None     # an `if`: its condition
    then: tuple = ()                 # an `if`: its statements
    otherwise: tuple | None = None   # an `if`: its else's statements, or None


def _blank_directives(mask: str) -> str:
    """Preprocessor lines as spaces: hostmap reads the conditions they set."""
    return re.sub(r"(?m)^[ \t]*#.*$", lambda m: " " * len(m.group()), mask)


def statements(text: str, mask: str, start: int, end: int) -> list[Statement]:
    """The statements of the block text[start:end] (inside its braces), `if`s with their
    branches; a nested `{ }` block's statements are inlined."""
    found, k = [], start
    while k < end:
        while k < end and mask[k].isspace():
            k += 1
        if k >= end:
            break
        if mask[k] == ";":
            k += 1
            continue
        if mask[k] == "{":
            close = matching_close(mask, k)
            if close < 0 or close > end:
                break
            found += statements(text, mask, k + 1, close)
            k = close + 1
            continue
        once = re.match(r"do\b\s*\{", mask[k:end])
        if once:
            # `do { ... } while (0);`, a macro's habit: its body runs once, as a `{ }` block
            # (not with a `break` or `continue` of its own, which would leave it early)
            brace = k + once.end() - 1
            close = matching_close(mask, brace)
            tail = re.match(r"\s*while\s*\(\s*(?:0|false)\s*\)\s*;", mask[close + 1:end]) \
                if 0 <= close < end else None
            if tail and not re.search(r"\b(?:break|continue)\b", mask[brace:close]):
                found += statements(text, mask, brace + 1, close)
                k = close + 1 + tail.end()
                continue
        m = re.match(r"if\b\s*(?:constexpr\s*)?\(", mask[k:end])
        if m:
            paren = k + m.end() - 1
            close = matching_close(mask, paren)
            then, after = _branch(text, mask, close + 1, end)
            otherwise = None
            rest = re.match(r"\s*else\b", mask[after:end])
            if rest:
                otherwise, after = _branch(text, mask, after + rest.end(), end)
            found.append(Statement(k, after, " ".join(text[k:paren].split()),
                                   " ".join(text[paren + 1:close].split()), tuple(then),
                                   None if otherwise is None else tuple(otherwise)))
            k = after
            continue
        stop = _statement_end(mask, k, end)
        found.append(Statement(k, stop, " ".join(text[k:stop].split())))
        k = stop + 1
    return found


def _branch(text: str, mask: str, k: int, end: int) -> tuple[list[Statement], int]:
    while k < end and mask[k].isspace():
        k += 1
    if k < end and mask[k] == "{":
        close = matching_close(mask, k)
        return statements(text, mask, k + 1, close), close + 1
    if re.match(r"if\b", mask[k:end]):
        one = statements(text, mask, k, end)[:1]
        return one, one[0].end if one else end
    stop = _statement_end(mask, k, end)
    return [Statement(k, stop, " ".join(text[k:stop].split()))], stop + 1


def _statement_end(mask: str, k: int, end: int) -> int:
    """The offset of the `;` ending the statement at `k` (brackets and lambdas skipped)."""
    depth = 0
    while k < end:
        ch = mask[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ";" and depth == 0:
            return k
        k += 1
    return end


class Outside(NamedTuple):
    """The first statement outside the model: where, and why that makes the op not proven."""

    offset: int
    statement: str
    why: str


class Context(NamedTuple):
    iterator: str                 # the host function's iterator parameter ("iter")
    parameters: tuple[str, ...]   # its other parameters' names
    several_kernels: bool         # it names two kernels or more (hostmap: not proven anyway)


def check_host_function(text: str, start: int, end: int, params: str,
                        several_kernels: bool = False) -> Outside | None:
    """The first statement of the host function whose body is text[start:end] (`{` .. `}`
    included) that is none of HOST_SHAPES, or None. `params`: its parameter list."""
    names = [_param_name(p) for p in params.split(",") if p.strip()]
    context = Context(names[0] if names else "iter", tuple(names[1:]), several_kernels)
    mask = _blank_directives(code_mask(text))
    open_at = mask.index("{", start)
    close = matching_close(mask, open_at)
    body = statements(text, mask, open_at + 1, close if close > 0 else end)
    return _check_block(body, context, top=True)


def _param_name(param: str) -> str:
    m = re.search(r"(\w+)\s*$", param.split("=", 1)[0].strip())
    return m.group(1) if m else ""


def _check_block(body, context: Context, top: bool) -> Outside | None:
    """`body`'s first statement outside the model. Blocks that run once (`{ }`, `do { } while
    (0)`) are inlined by `statements`, so a `return` here is taken by every run reaching it:
    before any kernel call the function leaves with the output unwritten, and what follows it
    never runs (checking it would call dead code unmodelled)."""
    calls = 0
    for s in body:
        if s.condition is not None:
            outside = _check_if(s, context, top, calls)
        else:
            outside = _check_simple(s, context)
            if outside is None and KERNEL_CALL_RE.fullmatch(s.text):
                calls += 1
                if calls > 1 and not context.several_kernels:
                    outside = Outside(s.start, s.text, "runs a kernel a second time: on an output "
                                      "that is also an input (an in-place call) the second run "
                                      "reads the first one's result")
            if outside is None and re.match(r"return\b", s.text):
                if top and not calls:
                    return Outside(s.start, s.text, "returns before any kernel call: on a Mac no "
                                   "kernel runs and the output is left unwritten")
                return None
        if outside is not None:
            return outside
    return None


def _check_simple(s: Statement, context: Context) -> Outside | None:
    text = s.text
    call = KERNEL_CALL_RE.fullmatch(text)
    if call:
        iterator = "".join(call["iter"].split())
        if iterator != context.iterator:
            return Outside(s.start, text, f"runs the kernel on `{iterator}`, not on the iterator the "
                           f"stub passes (`{context.iterator}`): its operands, their order or its "
                           "output are not the ones porter runs the kernel on")
        return None
    assigned = re.match(r"(\w+)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", text)
    if assigned and assigned.group(1) in context.parameters:
        return Outside(s.start, text, f"reassigns `{assigned.group(1)}`, a parameter the stub "
                       "passes: porter runs the kernel with the value the op was called with")
    if assigned and assigned.group(1) == context.iterator:
        return Outside(s.start, text, f"reassigns the iterator `{context.iterator}`")
    for key in ("check", "warning", "params struct", "params field", "dtype local", "limit locals",
                "kernel name", "void name"):
        if _SIMPLE[key].fullmatch(text):
            return None
    dispatch = DISPATCH_RE.fullmatch(text)
    if dispatch:
        inner = [x.strip() for x in dispatch["body"].split(";") if x.strip()]
        if inner and all(LIMIT_ASSIGN_RE.fullmatch(" ".join(x.split())) for x in inner):
            return None
        return Outside(s.start, text, "is a dtype dispatch whose body does more than read the "
                       "dtype's extremes (`x = static_cast<float>(std::numeric_limits<scalar_t>::"
                       "max());`): what it runs is not modelled")
    if RETURN_RE.fullmatch(text):
        return None
    return Outside(s.start, text, "is no statement porter models: it may change the output or "
                   "the kernel's inputs, and porter runs the kernel alone")


_SIMPLE = {"check": CHECK_RE, "warning": WARN_RE, "params struct": PARAMS_DECL_RE, "params field": PARAMS_FIELD_RE,
           "dtype local": DTYPE_LOCAL_RE, "limit locals": LIMIT_LOCALS_RE,
           "kernel name": NAME_LOCAL_RE, "void name": VOID_NAME_RE}


def _dtype_table(condition: str) -> dict[str, bool] | None:
    """The condition's value per tested dtype, or None when host_dtypes does not read it."""
    table = {}
    for dtype in TESTED_DTYPES:
        value = host_dtypes.evaluate(condition, dtype)
        if value is None:
            return None
        table[dtype] = value
    return table


def _returns(block) -> bool:
    return bool(block) and block[-1].condition is None and RETURN_RE.match(block[-1].text) is not None


def _has_call(block) -> bool:
    return any(KERNEL_CALL_RE.fullmatch(s.text) or _has_call(s.then) or _has_call(s.otherwise or ())
               for s in block)


def _check_if(s: Statement, context: Context, top: bool, calls_before: int) -> Outside | None:
    condition = s.condition
    empty = EMPTY_RE.fullmatch(condition)
    if empty and s.otherwise is None and [x.text for x in s.then] == ["return"]:
        return None                                                  # empty return
    table = _dtype_table(condition)
    then, otherwise = list(s.then), list(s.otherwise or ())
    if s.otherwise is None and not _has_call(then) and _returns(then) and top and not calls_before \
            and (table is not None or len(then) > 1):
        # a dtype return: host_dtypes reads it per dtype (a bare return fails the dtypes taking
        # it; a block of other code makes them not proven), and says not proven where it cannot
        # read a block's condition. A bare return on a condition it does not read (a scalar's
        # value) is outside: host_dtypes would take it for an empty iterator's
        return None
    if s.otherwise is None and _has_call(then) and _returns(then) and table is not None \
            and all(v == (d in INTEGRAL) for d, v in table.items()):
        # the integer params branch: host_args takes its `_long` call for these dtypes
        if all("_long\"" in x.text for x in then if KERNEL_CALL_RE.fullmatch(x.text)):
            return _check_block(then, context, top=False)
    if table is not None and top and (_has_call(then) != _has_call(otherwise)) and \
            s.otherwise is not None:
        # the kernel for the dtypes of one branch; the other's are not proven (host_dtypes)
        return _check_block(then if _has_call(then) else otherwise, context, top=False)
    pick = ENUM_PICK_RE.fullmatch(condition)
    if pick and (pick["lhs"] in context.parameters or pick["rhs"] in context.parameters) \
            and len(then) == 1 and len(otherwise) == 1 \
            and all(KERNEL_CALL_RE.fullmatch(x.text) for x in then + otherwise):
        # the kernel pick by an enum parameter, as an if/else: kernel_pick reads it
        return _check_block(then, context, top=False) or _check_block(otherwise, context, top=False)
    if context.several_kernels and s.otherwise is None and _has_call(then):
        return _check_block(then, context, top=False)
    return Outside(s.start, f"if ({condition})", "is a branch porter does not model: on the "
                   "samples taking it the kernel porter runs may not be what a Mac runs")


def check_impl(text: str, start: int, end: int) -> Outside | None:
    """The first statement of an op's MPS impl body (text[start:end], its braces included) that
    is none of IMPL_SHAPES, or None."""
    mask = _blank_directives(code_mask(text))
    open_at = mask.index("{", start)
    close = matching_close(mask, open_at)
    for s in statements(text, mask, open_at + 1, close if close > 0 else end):
        if s.condition is not None:
            if EMPTY_RE.fullmatch(s.condition) and s.otherwise is None \
                    and [x.text for x in s.then] == ["return"]:
                continue
            return Outside(s.start, f"if ({s.condition})", "is a branch porter does not model: "
                           "on the samples taking it the impl may not run the kernel porter runs")
        if re.fullmatch(r"using namespace [\w:]+", s.text) or CHECK_RE.fullmatch(s.text):
            continue
        call = KERNEL_CALL_RE.fullmatch(s.text)
        if call and "".join(call["iter"].split()) == "*this" and not s.text.startswith("return"):
            continue
        if call:
            return Outside(s.start, s.text, f"runs the kernel on `{call['iter']}`, not on the impl's "
                           "own iterator (`*this`)")
        if STUB_CALL_RE.fullmatch(s.text):
            continue
        return Outside(s.start, s.text, "is no statement porter models: it may change the output "
                       "or the kernel's inputs, and porter runs the kernel alone")
    return None


def not_proven(outside: Outside, text: str, where: str, rel: str) -> str:
    """The message: "not proven: <where>: `<statement>` (<rel>:<line>) <why> ..."."""
    line = line_of(text, outside.offset)
    shown = outside.statement if len(outside.statement) <= 90 else outside.statement[:87] + "..."
    return (f"not proven: {where}: `{shown}` ({rel}:{line}) {outside.why}; porter models only "
            "the host statements docs/testing.md lists (\"What the host may do\")")


def branch_refusal(body: str, first_line: int, dtype: str) -> "host_dtypes.HostRefusal | None":
    """Why `dtype` does not run the kernel in a host function (its text `body`, from its
    signature, starting on `first_line`) that splits dtypes with `if (<dtype condition>) {
    kernel } else { other code }` (upstream's fmax: at::maximum_out for integers): "not proven"
    for the dtypes taking the other branch, or None."""
    mask = _blank_directives(code_mask(body))
    open_at = mask.find("{")
    close = matching_close(mask, open_at) if open_at >= 0 else -1
    if close < 0:
        return None
    for s in statements(body, mask, open_at + 1, close):
        if s.condition is None or s.otherwise is None:
            continue
        then_calls, else_calls = _has_call(s.then), _has_call(s.otherwise)
        holds = host_dtypes.evaluate(s.condition, dtype)
        if then_calls == else_calls or holds is None or holds == then_calls:
            continue
        line = first_line + body.count("\n", 0, s.start)
        return host_dtypes.HostRefusal(line, f"not proven: for {dtype} `if ({s.condition})` takes "
                                             "the branch without the kernel call, which runs other "
                                             "code than the kernel porter runs")
    return None


def relative(path, root) -> str:
    """`path` relative to the checkout `root`, as messages name files."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return path.name


def function_unmodelled(host, fn, where: str, rel: str, several_kernels: bool) -> str:
    """Why the host function `fn` of the HostFile `host` is not proven: its first statement
    outside HOST_SHAPES, or ""."""
    outside = check_host_function(host.live_text, fn.start, fn.end, fn.params, several_kernels)
    return "" if outside is None else not_proven(outside, host.text, where, rel)


def impl_unmodelled(text: str, start: int, end: int, where: str, rel: str) -> str:
    """Why the MPS impl text[start:end] (TORCH_IMPL_FUNC(<op>_out_mps), running the kernel on
    `*this` or a stub) is not proven: its first statement outside IMPL_SHAPES, or ""."""
    from porter.source.cpp_scan import blank_spans, comments_blanked, inactive_spans
    live = blank_spans(comments_blanked(text), inactive_spans(code_mask(text)))
    outside = check_impl(live, start, end)
    return "" if outside is None else not_proven(outside, text, where, rel)
