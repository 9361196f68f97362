"""Which Metal kernel an op runs, read from the host .mm files of the checkout.

UnaryKernel.mm: `REGISTER_UNARY_TI_DISPATCH(name)` runs kernel `name` for stub `name_stub`.
Every host file with a .metal of its stem:
`static void fn(...) { ... exec_{unary,binary,ternary}_kernel(iter, "kernel" ...) }` plus `REGISTER_DISPATCH(stub, &fn)`. The op is the stub without `_stub` (`special_erfcx_stub`
-> `special.erfcx`). Each .mm pairs with the .metal of the same stem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from porter.source.checkout import KERNELS, NATIVE, OPERATIONS
from porter.source.cpp_scan import line_of
from porter.source.host_scan import HostFile, KernelCall

if TYPE_CHECKING:
    from porter.emulate.kernel_pick import KernelPick

# stubs whose op (OpInfo name) is not the stub's name
STUB_OPS = {"div_true": "div", "div_floor": "div", "div_trunc": "div",
            "round_decimals": "round", "pow_tensor_scalar": "pow", "pow_tensor_tensor": "pow"}


@dataclass(frozen=True)
class HostKernel:
    op: str           # OpInfo-style name ("special.erfcx", "div")
    stub: str         # "special_erfcx"
    kernel: str       # kernel name in the .metal ("erfcx")
    metal: Path       # the paired .metal file
    params: str = ""          # the host function's parameter list
    body: str = ""            # the host function's text (how it builds the kernel's alpha)
    params_struct: str = ""   # "SoftplusParams" when a params struct travels with the call
    # reached through another op's TORCH_IMPL_FUNC (sub_out -> add_stub): that op, and what
    # its stub call passes after the iterator (("-alpha",))
    via_op: str = ""
    via_arguments: tuple[str, ...] | None = None
    # the registration is under a preprocessor condition porter cannot decide (`#ifdef X`):
    # that condition and where (whether MPS has the kernel at all is not proven)
    condition: str = ""
    # the host function picks its kernel's name at run time (two names under a branch, or a
    # name computed as gelu's `approximate == Tanh ? "gelu_tanh" : "gelu"`): which kernel a
    # sample runs is not modelled, so nothing about it is proven; what and where, or ""
    choice: str = ""
    # the exec_*_kernel call the host function makes (what a Mac looks the kernel up by), and
    # where the function is: "logit_mps_kernel (operations/UnaryKernel.mm:41)"
    calls: tuple[KernelCall, ...] = ()     # those a run can reach, in source order
    function: str = ""
    line: int = 0             # where the host function (and `body`) starts
    # why every dtype fails or is not proven whatever the kernel does (the function runs no
    # kernel: its call is commented out, compiled out or after its return), or ""
    fault: str = ""
    # the kernel a sample runs, by its `str` argument, where the op's MPS impl hands a stub an
    # enum and the host function picks by it (gelu: porter.emulate.kernel_pick), else None
    pick: "KernelPick | None" = None
    # the first statement of the host function (or of the MPS impl it is reached from) outside
    # the host shapes porter models (porter.emulate.host_model): "not proven: ..." or ""
    unmodelled: str = ""
    # the op's own MPS impl that runs the kernel ("gelu_out_mps": in place on *this, or through
    # a stub), which its yaml row must name; "" for a kernel reached through the shared
    # CPU/CUDA function's stub call
    impl: str = ""

    def for_sample(self, kwargs: dict) -> "HostKernel":
        """This host kernel as a sample with `kwargs` runs it: the picked kernel and its call."""
        if self.pick is None:
            return self
        kernel = self.pick.kernel_for(kwargs)
        calls = tuple(c for c in self.pick.calls if c.kernel == kernel) or self.calls
        return replace(self, kernel=kernel, calls=calls)

    @property
    def call(self) -> KernelCall | None:
        return self.calls[0] if self.calls else None

    def at_line(self, line: int) -> str:
        """The host function, with `line` of its file: "fn (operations/X.mm:LINE)"."""
        return re.sub(r":\d+\)$", f":{line})", self.function)


def shared_stub_kernels(root: Path, op: str, kernels: list[HostKernel]) -> list[HostKernel]:
    """The kernels of an op whose structured kernel runs a stub named after another op
    (`hardshrink_backward_out` runs `shrink_backward_stub`, shared with softshrink_backward):
    read from the op's TORCH_IMPL_FUNC in the checkout's native .cpp files."""
    from porter.source.native_definitions import impl_stubs

    native = Path(root) / NATIVE
    for cpp in sorted(native.glob("*.cpp")):
        text = cpp.read_text(encoding="utf-8", errors="replace")
        if f"{op}_out" not in text:
            continue
        stubs = impl_stubs(text).get(f"{op}_out")
        if stubs:
            names = {s.removesuffix("_stub") for s in stubs}
            return [replace(k, op=op, via_op=op) for k in kernels if k.stub in names]
    return []


def op_name(stub: str) -> str:
    if stub in STUB_OPS:
        return STUB_OPS[stub]
    if stub.startswith("special_"):
        return "special." + stub[len("special_"):]
    return stub


def _condition(host: HostFile, mm: Path, line: int) -> str:
    condition = host.condition_at_line(line)
    return f"`{condition}` ({mm.parent.name}/{mm.name}:{line})" if condition else ""


def host_kernels(root: Path) -> list[HostKernel]:
    """Every (stub, kernel) the host files register, read with porter.source.host_scan: each
    `*.mm` with a `.metal` of its stem (`UnaryKernel.mm`, and upstream's `PointwiseOps.mm` beside
    `PointwiseOps.metal` once addcmul moved to Metal)."""
    root = Path(root)
    found: list[HostKernel] = []
    stubs = None
    registered: dict[str, list[tuple[Path, int]]] = {}     # stub -> where each registers it
    for mm in sorted((root / OPERATIONS).glob("*.mm")):
        metal = root / KERNELS / f"{mm.stem}.metal"
        if not metal.is_file():
            continue
        host = HostFile(mm.read_text(encoding="utf-8", errors="replace"), str(mm))
        macro = _ti_macro_unmodelled(host, mm, root) if host.ti_dispatches else ""
        for name, line in host.ti_dispatches:
            registered.setdefault(name, []).append((mm, line))
            found.append(HostKernel(op_name(name), name, name, metal,
                                    condition=_condition(host, mm, line), unmodelled=macro))
        for reg in host.dispatch_registrations:
            if reg.via_macro or not reg.stub.endswith("_stub"):
                continue
            stub = reg.stub[:-len("_stub")]
            registered.setdefault(stub, []).append((mm, reg.line))
            fn = host.kernel_functions.get(reg.function.split("::")[-1])
            running = fn.running_calls if fn else ()
            call = running[0] if running else None
            choice = _kernel_choice(mm, fn) if fn else ""
            where = f"{fn.name} ({mm.parent.name}/{mm.name}:{fn.line})" if fn else ""
            fault = _no_kernel_runs(fn, mm, where) if fn and not call and not choice else ""
            if fn and not fault:
                if stubs is None:
                    from porter.source.checkout import Checkout
                    from porter.source.stubs import declared_stubs
                    stubs = declared_stubs(Checkout(root))
                fault = _signature_mismatch(fn, stubs.get(reg.stub), reg.stub, where)
            if fault or (choice and not call):
                found.append(HostKernel(op_name(stub), stub, "", metal, fn.params,
                                        host.live_text[fn.start:fn.end], choice=choice,
                                        condition=_condition(host, mm, reg.line), function=where,
                                        fault=fault))
            if call:
                body = host.live_text[fn.start:fn.end]
                unmodelled = (_macro_unmodelled(host, mm, root, fn, reg.line, where)
                              or _unmodelled(host, mm, root, fn, where, choice))
                fault = fault or _jit_library_lacks(host.live_text, mm, metal, call.kernel, where)
                if call.condition:
                    fault = (f"not proven: the {_spelled(call)} call of {where} is under "
                             f"`{call.condition}` ({mm.parent.name}/{mm.name}:{call.line}), a "
                             "condition porter cannot evaluate: a build that does not define it "
                             "runs no kernel and leaves the output unwritten")
                struct = ""
                if call.with_params:
                    m = re.search(r"\bexec_\w+_kernel_with_params\s*\([^;]*\"(\w+)_float\"", body)
                    struct = m.group(1) if m else "?"
                found.append(HostKernel(op_name(stub), stub, call.kernel, metal, fn.params, body,
                                        struct, condition=_condition(host, mm, reg.line),
                                        choice=choice, calls=running, function=where, fault=fault,
                                        line=fn.line, unmodelled=unmodelled))
                if "_polynomial_" in stub and not stub.startswith("special_"):
                    # the special polynomials' stubs drop the prefix their ops and kernels carry
                    # (laguerre_polynomial_l_stub runs special.laguerre_polynomial_l)
                    found.append(HostKernel(op_name(f"special_{stub}"), stub, call.kernel, metal,
                                            fn.params, body, struct,
                                            condition=_condition(host, mm, reg.line), calls=running,
                                            function=where, fault=fault, line=fn.line,
                                            unmodelled=unmodelled))
    _also_registered_elsewhere(root, registered)
    found = [replace(h, fault=_registered_twice(h.stub, registered[h.stub]))
             if not h.fault and len(registered.get(h.stub, ())) > 1 else h for h in found]
    # a .mm that registers one stub twice does not compile: on a Mac no op of it runs
    broken = {mm.stem: stub for stub, where in registered.items()
              for mm in {m for m, _ in where} if sum(m == mm for m, _ in where) > 1}
    found = [replace(h, fault=(f"{h.metal.stem}.mm does not compile on a Mac: it registers "
                               f"{broken[h.metal.stem]}_stub twice (porter check: PORTER021)"))
             if not h.fault and h.metal.stem in broken else h for h in found]
    from porter.emulate.kernel_pick import stub_impl_kernels
    return found + in_place_kernels(root) + stub_impl_kernels(root, HostKernel)


def _macro_unmodelled(host: HostFile, mm: Path, root: Path, fn, line: int, where: str) -> str:
    """Not proven where the registration at `line`, or the host function `fn`, names a macro
    of the checkout (porter.emulate.host_macros): a Mac compiles its expansion."""
    from porter.emulate.host_macros import computed_include, redefined
    text = host.live_text
    computed = computed_include(root, mm, text)
    if computed is not None:
        return (f"not proven: {computed} includes a file a macro names: which file a Mac's "
                f"preprocessor reads there, and what it defines for {where}, porter does not know")
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
    end = text.find("\n", start)
    found = redefined(root, mm, text, [(start, len(text) if end < 0 else end), (fn.start, fn.end)])
    if found is None:
        return ""
    return (f"not proven: {found} is a macro of the checkout, and {where} or its "
            f"REGISTER_DISPATCH ({mm.parent.name}/{mm.name}:{line}) names it: a Mac compiles what "
            "it expands to, and porter reads the code as written")


def _unmodelled(host: HostFile, mm: Path, root: Path, fn, where: str, choice: str) -> str:
    from porter.emulate import host_model
    return host_model.function_unmodelled(host, fn, where, host_model.relative(mm, root), bool(choice))


def _rel(path: Path, root: Path) -> str:
    from porter.emulate import host_model
    return host_model.relative(path, root)


TI_MACRO_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+REGISTER_UNARY_TI_DISPATCH\(\s*(\w+)\s*\)"
                         r"((?:[^\n]*\\\n)*[^\n]*)", re.M)


def _ti_macro_unmodelled(host: HostFile, mm: Path, root: Path) -> str:
    """Why the host function REGISTER_UNARY_TI_DISPATCH defines is not proven, or "": its body
    must run `#NAME` on its iterator and do nothing else (porter.emulate.host_model)."""
    from porter.emulate import host_model
    m = TI_MACRO_RE.search(host.text)
    if m is None:
        return ""        # the macro comes from a header: upstream's own
    arg, definition = m.group(1), m.group(2)
    # the macro's text as code: `#NAME` is the kernel's name, `NAME##_x` a name
    code = definition.replace(f"#{arg}", '"kernel"').replace("##", "").replace("\\\n", " \n")
    head = re.search(r"void\s+\w+\s*\(([^)]*)\)\s*\{", code)
    if head is None or f'"kernel"' not in code:
        return (f"not proven: REGISTER_UNARY_TI_DISPATCH ({_rel(mm, root)}:{line_of(host.text, m.start())})"
                " defines no host function porter reads (`static void NAME##_kernel_mps("
                "TensorIteratorBase& iter) { lib.exec_unary_kernel(iter, #NAME); }`)")
    outside = host_model.check_host_function(code, head.start(), len(code), head.group(1))
    if outside is None:
        return ""
    line = line_of(host.text, m.start()) + code.count("\n", 0, outside.offset)
    return (f"not proven: REGISTER_UNARY_TI_DISPATCH ({_rel(mm, root)}:{line}): `{outside.statement}` "
            f"{outside.why}")


def impl_unmodelled(text: str, start: int, end: int, mm: Path, root: Path, name: str) -> str:
    from porter.emulate import host_model
    return host_model.impl_unmodelled(text, start, end, f"{name} ({mm.parent.name}/{mm.name}:"
                                      f"{line_of(text, start)})", host_model.relative(mm, root))


def _also_registered_elsewhere(root: Path, registered: dict[str, list[tuple[Path, int]]]) -> None:
    """Adds to `registered` what the .mm files without a .metal register of the same stubs: an
    MPSGraph registration left behind (`REGISTER_MPS_UNARY_STUB(op, selector)` or a
    `REGISTER_DISPATCH` in Activation.mm) registers the stub a second time."""
    for mm in sorted((root / OPERATIONS).glob("*.mm")):
        if (root / KERNELS / f"{mm.stem}.metal").is_file():
            continue
        text = mm.read_text(encoding="utf-8", errors="replace")
        if not any(f"{stub}_stub" in text or f"REGISTER_MPS_UNARY_STUB({stub}" in text
                   for stub in registered):
            continue        # the cheap test first: most .mm files register none of these
        host = HostFile(text, str(mm))
        for reg in host.dispatch_registrations:
            stub = reg.stub.removesuffix("_stub")
            if stub in registered and not reg.condition:
                registered[stub].append((mm, reg.line))
        for stub, (_, line) in host.mpsgraph_stubs.items():
            if stub in registered:
                registered[stub].append((mm, line))


def _registered_twice(stub: str, where: list[tuple[Path, int]]) -> str:
    """A stub the .mm files register more than once. REGISTER_DISPATCH defines a static
    registrar named after the stub (`static RegisterMPSDispatch<...> hardshrink_stub__register`):
    twice in one file is a redefinition, which does not compile; in two files, static
    initialization order picks one, which is not known here (porter check: PORTER021)."""
    at = ", ".join(f"{mm.parent.name}/{mm.name}:{line}" for mm, line in where)
    if len({mm for mm, _ in where}) < len(where):
        return (f"{stub}_stub is registered more than once in one file ({at}): REGISTER_DISPATCH "
                f"defines {stub}_stub__register each time, a redefinition that does not compile "
                "on a Mac; keep one registration (porter check: PORTER021)")
    return (f"not proven: {stub}_stub is registered in more than one file ({at}): on a Mac "
            "static initialization order picks one, which is not known here; keep one "
            "registration (porter check: PORTER021)")


def _spelled(call: KernelCall) -> str:
    return f"exec_{call.kind}_kernel{'_with_params' if call.with_params else ''}"


def _signature_mismatch(fn, stub, stub_name: str, where: str) -> str:
    """Why REGISTER_DISPATCH(stub, fn) does not compile on a Mac: the function's parameter types
    are not the stub's (`porter check` reports it too, PORTER022); "" when they are, or when the
    stub's declaration is not found here."""
    from porter.source.stubs import param_type, param_types
    if stub is None or not stub.signature.startswith("void"):
        return ""
    got, want = param_types(fn.params), [param_type(p) for p in stub.params]
    if got == want:
        return ""
    return (f"{where} takes ({', '.join(got)}), but {stub_name} passes ({', '.join(want)}) "
            f"({stub.header}:{stub.line}): its REGISTER_DISPATCH does not compile on a Mac; "
            f"make it take ({', '.join(want)}) (porter check: PORTER022)")


def _no_kernel_runs(fn, mm: Path, where: str) -> str:
    """Why the registered host function `fn` runs no Metal kernel though its text shows one
    (a call in a comment, under `#if 0`, after its return), or "" when it never had one."""
    after = [c for c in fn.calls if c.after_return]
    if after:
        why = (f"its {_spelled(after[0])} call ({mm.name}:{after[0].line}) follows the "
               f"unconditional return on line {after[0].after_return}")
    elif fn.disabled:
        why = (f"its exec_*_kernel call ({mm.name}:{fn.disabled[0]}) is in a comment or in code "
               "the preprocessor drops")
    else:
        return ""
    return (f"{where} runs no Metal kernel: {why}; on a Mac the output is never written "
            "(restore the call)")


def _kernel_choice(mm: Path, fn) -> str:
    """Why the kernel `fn` runs is chosen at run time, or "": several kernel names in its
    body, or one it computes."""
    names = list(dict.fromkeys(c.kernel for c in fn.running_calls))
    computed = list(fn.computed)
    if len(names) < 2 and not computed:
        return ""
    picks = ", ".join([f'"{n}"' for n in names] + [f"`{c}`" for c in computed])
    return (f"{fn.name} ({mm.parent.name}/{mm.name}:{fn.line}) picks its Metal kernel at run "
            f"time ({picks}), by a condition porter does not model")


def _jit_library_lacks(text: str, mm: Path, metal: Path, kernel: str, where: str) -> str:
    """Why JIT-shader builds (PYTORCH_JIT_COMPILE_SHADERS: a Mac without the Metal toolchain)
    of the host file `mm` find no `kernel`: they compile only the .metal files whose
    *_metallib.h the host includes, and `metal` (where the kernel is) is not one; "" when it
    is, or when the host includes none. Bundled builds hold every file's kernels."""
    loaded = METALLIB_RE.findall(text)
    if not loaded or metal.stem in loaded:
        return ""
    files = ", ".join(f"{stem}.metal" for stem in loaded)
    return (f"{where} runs '{kernel}', registered in {metal.name}, but JIT-shader builds "
            f"(PYTORCH_JIT_COMPILE_SHADERS) of {mm.name} load only {files} (its *_metallib.h "
            f"includes): every call fails there ('Failed to create function state object for: "
            f"{kernel}_...'); include <ATen/native/mps/{metal.stem}_metallib.h> or move the "
            "kernel (porter check: PORTER010)")


METALLIB_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<ATen/native/mps/(\w+)_metallib\.h>", re.M)
IMPL_CALL_RE = re.compile(r'^TORCH_IMPL_FUNC\((?P<op>\w+?)_out_mps\)')
THIS_CALL_RE = re.compile(r'exec_(?P<kind>unary|binary|ternary)_kernel\(\s*\*this\s*,\s*"(?P<kernel>\w+)"'
                          r'(?P<scalar>\s*,)?')


def in_place_kernels(root: Path) -> list[HostKernel]:
    """Ops ported in place: `TORCH_IMPL_FUNC(<op>_out_mps)` bodies that run a Metal kernel on
    `*this` (upstream's Activation.mm). The kernel is looked up in every .metal file, the
    host file's `<stem>Kernel.metal` first: the bundled library holds them all."""
    from porter.source.mpsgraph_scan import source_of
    root = Path(root)
    metals = sorted((root / KERNELS).glob("*.metal"))
    found: list[HostKernel] = []
    for mm in sorted((root / OPERATIONS).glob("*.mm")):
        text = mm.read_text(encoding="utf-8", errors="replace")
        if "*this" not in text or "TORCH_IMPL_FUNC" not in text:
            continue
        source = source_of(text)
        for d in source.definitions:
            m = IMPL_CALL_RE.match(text[d.start:d.end])
            call = THIS_CALL_RE.search(text, d.start, d.end) if m else None
            if not call:
                continue
            kernel = call["kernel"]
            # the .metal files this host loads in JIT builds (its *_metallib.h includes), then
            # `<stem>Kernel.metal`, then the kind's own file: where the kernel should be
            loaded = [root / KERNELS / f"{stem}.metal" for stem in METALLIB_RE.findall(text)]
            paired = [p for p in loaded + [root / KERNELS / f"{mm.stem}Kernel.metal",
                                           root / KERNELS / f"{call['kind'].title()}Kernel.metal"]
                      if p.is_file()]
            metal = next((p for p in paired + metals
                          if re.search(rf"\b{re.escape(kernel)}\s*[,)]", p.read_text(encoding="utf-8",
                                                                                   errors="replace"))),
                         None)
            # a kernel no .metal registers is still the op's MPS path: its test fails, as on a Mac
            metal = metal or (paired[0] if paired else None)
            if metal is not None:
                where = f"{m['op']}_out_mps ({mm.parent.name}/{mm.name})"
                found.append(HostKernel(op_name(m["op"]), m["op"], kernel, metal,
                                        fault=_jit_library_lacks(text, mm, metal, kernel, where),
                                        unmodelled=impl_unmodelled(text, d.start, d.end, mm, root,
                                                                   f"{m['op']}_out_mps"),
                                        impl=f"{m['op']}_out_mps"))
    return found
