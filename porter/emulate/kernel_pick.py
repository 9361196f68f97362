"""Which Metal kernel an op's own MPS function runs when it hands an enum to a DispatchStub and
the stub's host function picks the kernel by it (upstream's gelu, pytorch#181451):

    TORCH_IMPL_FUNC(gelu_out_mps)(const Tensor& self, std::string_view approximate, ...) {
      GeluKernel(kMPS, *this, get_gelutype_enum(approximate));
    }
    static void gelu_kernel(TensorIteratorBase& iter, GeluType approximate) {
      const char* name = (approximate == GeluType::Tanh) ? "gelu_tanh" : "gelu";
      lib.exec_unary_kernel(iter, name);
    }
    REGISTER_DISPATCH(GeluKernel, gelu_kernel);

Everything is read from the checkout's text: the stub call's argument, the string-to-enum
function it goes through (porter.source.enum_strings), and the host function's ternary or
`if`/`else` on the enum. The outcome is a table from each string the op accepts to the kernel a
Mac runs for it, so a host with the two names swapped runs the wrong kernel on every sample.
What porter cannot read is a reason (`choice`): the op is not proven, never green.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from porter.source import native_yaml
from porter.source.checkout import KERNELS, NATIVE_YAML, OPERATIONS, Checkout
from porter.source.cpp_scan import line_of, matching_close, split_top_level
from porter.source.enum_strings import StringEnum, string_enum, unqualified
from porter.source.host_scan import EXEC_CALL_RE, HostFile, KernelCall

IMPL_HEAD_RE = re.compile(r"^TORCH_IMPL_FUNC\((?P<op>\w+?)_out_mps\)\s*\((?P<params>[^{]*?)\)\s*\{", re.M | re.S)
# `GeluKernel(kMPS, *this, ...)`: the impl runs a DispatchStub for the MPS device
STUB_CALL_RE = re.compile(r"\b(?P<stub>\w+)\s*\(\s*(?:at::|c10::)?(?:DeviceType::)?kMPS\s*,\s*\*this\s*(?P<rest>[,)])")
STRING_TYPES = ("str", "str?")


@dataclass(frozen=True)
class KernelPick:
    """The kernel each value of the op's `str` argument runs: `(("none", "gelu"), ("tanh",
    "gelu_tanh"))`, as the stub call, the string-to-enum function and the host's condition give it."""

    argument: str                        # approximate
    default: str | None                  # the schema's default ('none')
    kernels: tuple[tuple[str, str], ...]
    calls: tuple[KernelCall, ...]        # one per kernel, as the host calls it
    how: str                             # "gelu_out_mps (Activation.mm:118) -> GeluKernel -> ..."
    only: str = ""                       # the one kernel a host without a condition runs

    def kernel_for(self, kwargs: dict) -> str:
        if self.only:
            return self.only
        value = kwargs.get(self.argument, self.default)
        found = dict(self.kernels).get(value)
        if found is None:
            accepted = " or ".join(v for v, _ in self.kernels)
            raise RuntimeError(f"{self.argument}={value!r}: {self.how} accepts {accepted} "
                               "(its TORCH_CHECK raises for any other value)")
        return found


@dataclass(frozen=True)
class StubImpl:
    """An op's MPS impl that runs a stub with kMPS, and what it passes."""

    op: str
    stub: str
    arguments: tuple[str, ...]           # after `*this`, as written
    impl_params: tuple[str, ...]         # the impl's parameter names
    where: str                           # "gelu_out_mps (operations/Activation.mm:118)"
    # its first statement outside the shapes porter models (porter.emulate.host_model), or ""
    unmodelled: str = ""


def _impl_unmodelled(text: str, start: int, end: int, mm: Path, root: Path, op: str) -> str:
    from porter.emulate import host_model
    return host_model.impl_unmodelled(text, start, end, f"{op}_out_mps ({mm.parent.name}/{mm.name}:"
                                      f"{line_of(text, start)})", host_model.relative(mm, Path(root)))


def stub_impls(root: Path) -> list[StubImpl]:
    """Every `TORCH_IMPL_FUNC(<op>_out_mps)` whose body runs a DispatchStub with kMPS."""
    found = []
    for mm in sorted((Path(root) / OPERATIONS).glob("*.mm")):
        text = mm.read_text(encoding="utf-8", errors="replace")
        if "kMPS" not in text or "TORCH_IMPL_FUNC" not in text:
            continue
        host = HostFile(text, str(mm))
        mask = host.mask
        for head in IMPL_HEAD_RE.finditer(mask):
            close = matching_close(mask, head.end() - 1)
            call = STUB_CALL_RE.search(mask, head.end(), close) if close > 0 else None
            if not call:
                continue
            arguments: tuple[str, ...] = ()
            if call["rest"] == ",":
                end = matching_close(mask, mask.index("(", call.start()))
                arguments = tuple(" ".join(a.split()) for a in
                                  split_top_level(host.live_text[call.end():end]) if a.strip())
            params = tuple(_name(p) for p in split_top_level(head["params"]) if p.strip())
            where = (f"{head['op']}_out_mps ({mm.parent.name}/{mm.name}:"
                     f"{line_of(text, head.start())})")
            found.append(StubImpl(head["op"], call["stub"], arguments, params, where,
                                  _impl_unmodelled(text, head.start(), close + 1, mm, root, head["op"])))
    return found


def _name(param: str) -> str:
    m = re.search(r"(\w+)\s*$", param.split("=", 1)[0].strip())
    return m.group(1) if m else ""


def pick_of(root: Path, impl: StubImpl, fn, host: HostFile, mm: Path) -> KernelPick | str:
    """The kernel table of `impl`'s registered host function `fn` (in `mm`), or why porter
    cannot read it (a string beginning "not proven")."""
    where = f"{fn.name} ({mm.parent.name}/{mm.name}:{fn.line})"
    how = f"{impl.where} -> {impl.stub} -> {where}"
    body = host.live_text[fn.start:fn.end]
    params = [_name(p) for p in split_top_level(fn.params)][1:]
    calls = _exec_calls(host, fn)
    if not calls:
        return f"not proven: {where} runs no exec_*_kernel call porter can read"
    literal = {c.kernel for c in calls if c.kernel}
    if len(calls) == 1 and calls[0].kernel:
        # one kernel whatever the enum says (the compare dropped): every value runs it
        return KernelPick("", None, (), tuple(calls), how, only=calls[0].kernel)
    names, condition = _choice(body, calls)
    if names is None:
        return (f"not proven: {where} picks its Metal kernel at run time "
                f"({', '.join(sorted(literal)) or 'a computed name'}) by a condition porter does "
                "not model (it reads `P == Enum::X ? \"a\" : \"b\"` or `if (P == Enum::X) {...} "
                "else {...}` on a parameter the stub fills from a string-to-enum function)")
    param, negated, enumerator = condition
    if param not in params:
        return f"not proven: {where} compares `{param}`, which is none of its parameters"
    position = params.index(param)
    if position >= len(impl.arguments):
        return (f"not proven: {impl.where} passes {impl.stub} {len(impl.arguments)} argument(s) "
                f"after *this, and {where} reads its parameter {position + 2}")
    values = _accepted(root, impl, impl.arguments[position])
    if isinstance(values, str):
        return values
    argument, default, table = values
    if enumerator not in {e for _, e in table}:
        return (f"not proven: {where} compares {param} with {enumerator}, which the string-to-enum "
                f"function never returns")
    then, otherwise = names
    kernels = tuple((v, then if (e == enumerator) != negated else otherwise) for v, e in table)
    by_name = {c.kernel: c for c in calls if c.kernel}
    template = calls[0]
    picked = tuple(by_name.get(k) or template._replace(kernel=k) for k in dict.fromkeys(k for _, k in kernels))
    return KernelPick(argument, default, kernels, picked, how)


def _exec_calls(host: HostFile, fn) -> list[KernelCall]:
    """The function's exec_*_kernel calls, literal names or not (kernel "" when computed)."""
    found = []
    for call in EXEC_CALL_RE.finditer(host.mask, fn.start, fn.end):
        end = matching_close(host.mask, call.end() - 1)
        if end < 0:
            continue
        args = split_top_level(host.live_text[call.end():end])
        name = re.fullmatch(r'\s*"(\w+)"\s*', args[1]) if len(args) > 1 else None
        if name is None and len(args) > 1 and re.fullmatch(r"\s*\w+\s*", args[1]):
            # `const char* name = "gelu";` ... `exec_unary_kernel(iter, name)`: one literal
            local = args[1].strip()
            sets = re.findall(rf"\b{local}\s*=\s*([^;=][^;]*);", host.live_text[fn.start:fn.end])
            name = re.fullmatch(r'\s*"(\w+)"\s*', sets[0]) if len(sets) == 1 else None
        found.append(KernelCall(call.group(1), name.group(1) if name else "", bool(call.group(2)),
                                tuple(a.strip() for a in args[2:]), line_of(host.text, call.start())))
    return found


CONDITION = r"\(?\s*(?P<lhs>[\w:]+)\s*(?P<op>==|!=)\s*(?P<rhs>[\w:]+)\s*\)?"
TERNARY_RE = re.compile(CONDITION + r'\s*\?\s*"(?P<then>\w+)"\s*:\s*"(?P<else>\w+)"')
IF_ELSE_RE = re.compile(r"\bif\s*\(\s*" + CONDITION.replace(r"\(?", "").replace(r"\)?", "")
                        + r'\s*\)\s*\{[^{}]*?"(?P<then>\w+)"[^{}]*\}\s*else\s*\{[^{}]*?"(?P<else>\w+)"[^{}]*\}')


def _choice(body: str, calls: list[KernelCall]):
    """((kernel when true, kernel when false), (parameter, negated, enumerator)) of the one
    condition that picks the kernel, or (None, None)."""
    computed = [c for c in calls if not c.kernel]
    if computed and len(calls) == 1:
        # the name is a local set by a ternary, or the ternary itself
        m = TERNARY_RE.search(body)
        if m is None or len(TERNARY_RE.findall(body)) != 1:
            return None, None
    elif not computed and len(calls) == 2:
        m = IF_ELSE_RE.search(body)
        if m is None or {m["then"], m["else"]} != {c.kernel for c in calls}:
            return None, None
    else:
        return None, None
    lhs, rhs = m["lhs"], m["rhs"]
    param, enumerator = (lhs, rhs) if "::" in rhs and "::" not in lhs else (rhs, lhs)
    if "::" in param or "::" not in enumerator:
        return None, None
    return (m["then"], m["else"]), (param, m["op"] == "!=", unqualified(enumerator))


def _accepted(root: Path, impl: StubImpl, argument: str):
    """(schema argument, its default, ((string, enumerator), ...)) for the op's str argument
    that `argument` (the stub call's, `get_gelutype_enum(approximate)`) converts; a string
    beginning "not proven" where porter cannot read it."""
    checkout = Checkout(root)
    entries = native_yaml.entries_named(checkout.read(NATIVE_YAML), {impl.op})
    entry = next((e for e in entries if any(r.kernel == f"{impl.op}_out_mps" for r in e.mps_rows())),
                 None)
    strings = []
    if entry is not None:
        for a in native_yaml.arguments(entry.schema).others:
            if native_yaml.argument_type(a) in STRING_TYPES:
                default = a.split("=", 1)[1].strip().strip("'\"") if "=" in a else None
                strings.append((native_yaml.argument_name(a), default))
    if not strings:
        return f"not proven: {impl.where}: {impl.op}'s schema has no str argument for {impl.stub} to pick by"
    m = re.fullmatch(r"(?:[\w:]+::)?(\w+)\s*\(\s*(\w+)\s*\)", argument)
    named = {n: d for n, d in strings}
    if m is None or m.group(2) not in named:
        return (f"not proven: {impl.where} passes `{argument}` to {impl.stub}: porter reads a "
                "string-to-enum function of the op's str argument there (`get_gelutype_enum(approximate)`)")
    mapping: StringEnum | None = string_enum(checkout, m.group(1))
    if mapping is None:
        return (f"not proven: {impl.where} converts {m.group(2)} with {m.group(1)}, which no "
                "native/*.h of the checkout defines as `if (s == \"...\") return Enum::X;` branches")
    return m.group(2), named[m.group(2)], mapping.values


def stub_impl_kernels(root: Path, make) -> list:
    """A host kernel per op whose MPS impl runs a stub with kMPS (`make(**fields)` builds the
    record): its kernel table, or the reason (`fault` when a Mac fails, `choice` when porter
    cannot tell)."""
    root = Path(root)
    impls = stub_impls(root)
    if not impls:
        return []
    registered = {}
    for mm in sorted((root / OPERATIONS).glob("*.mm")):
        metal = root / KERNELS / f"{mm.stem}.metal"
        if not metal.is_file():
            continue
        text = mm.read_text(encoding="utf-8", errors="replace")
        host = HostFile(text, str(mm))
        for reg in host.dispatch_registrations:
            registered.setdefault(reg.stub, (reg, host, mm, metal))
    found = []
    for impl in impls:
        if impl.stub not in registered:
            found.append(make(op=impl.op, stub=impl.op, kernel="", metal=root / KERNELS,
                              function=impl.where, impl=f"{impl.op}_out_mps",
                              fault=(f"{impl.where} runs {impl.stub}, which no *Kernel.mm registers "
                                     f"for MPS: MPS raises '{impl.stub}: missing kernel for mps' "
                                     f"(REGISTER_DISPATCH({impl.stub}, ...) in the .mm of its kernels)")))
            continue
        reg, host, mm, metal = registered[impl.stub]
        fn = host.kernel_functions.get(reg.function.split("::")[-1])
        if fn is None:
            found.append(make(op=impl.op, stub=impl.op, kernel="", metal=metal, function=impl.where,
                              impl=f"{impl.op}_out_mps",
                              choice=f"not proven: {reg.function}, which {mm.name} registers on "
                                     f"{impl.stub}, is no host function porter can read"))
            continue
        pick = pick_of(root, impl, fn, host, mm)
        where = f"{fn.name} ({mm.parent.name}/{mm.name}:{fn.line})"
        body = host.live_text[fn.start:fn.end]
        if isinstance(pick, str):
            found.append(make(op=impl.op, stub=impl.op, kernel="", metal=metal, params=fn.params,
                              body=body, choice=pick.removeprefix("not proven: "),
                              function=where, line=fn.line, impl=f"{impl.op}_out_mps"))
            continue
        from porter.emulate import host_model
        unmodelled = impl.unmodelled or host_model.function_unmodelled(
            host, fn, where, host_model.relative(mm, root), False)
        found.append(make(op=impl.op, stub=impl.op, kernel=pick.only or pick.kernels[0][1], metal=metal,
                          params=fn.params, body=body, calls=pick.calls, function=where,
                          line=fn.line, pick=pick, unmodelled=unmodelled, impl=f"{impl.op}_out_mps"))
    return found
