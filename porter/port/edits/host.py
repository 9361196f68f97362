"""Register the Metal kernel on the op's DispatchStub in the paired `.mm` host file.

UnaryKernel.mm: `REGISTER_UNARY_TI_DISPATCH(op)` when the stub is `op_stub`, the kernel `op`
and the stub takes only a TensorIteratorBase&. Otherwise, as BinaryKernel.mm does: a static
kernel function whose parameter type matches the stub's DECLARE_DISPATCH type, after the last
such function, and its REGISTER_DISPATCH at the end of the registration list.
"""

from __future__ import annotations

import re

from porter.source.host_scan import EXEC_CALL_RE, HostFile
from porter.port.templates import render

NO_NAMESPACE_END = "no `} // namespace at::native` line to insert before"


def uses_ti_macro(host: HostFile, stub_name: str, kernel: str, iterator: str | None,
                  n_params: int) -> bool:
    return (bool(host.ti_dispatch_names) and stub_name == f"{kernel}_stub"
            and iterator == "TensorIteratorBase" and n_params == 1)


def add_ti_dispatch(text: str, kernel: str) -> str:
    host = HostFile(text)
    if kernel in host.ti_dispatch_names:
        return text
    lines = list(re.finditer(r"^REGISTER_UNARY_TI_DISPATCH\((\w+)\);?[^\n]*\n", host.mask, re.M))
    line = f"REGISTER_UNARY_TI_DISPATCH({kernel});\n"
    at = _list_place(lines, kernel)
    return text[:at] + line + text[at:]


def _list_place(lines: list[re.Match], name: str) -> int:
    """Where a new line of a registration list goes: at its alphabetical place when the list is
    in alphabetical order (3 lines or more), else after the last (docs/porting.md's source order)."""
    names = [m.group(1) for m in lines]
    if len(names) >= 3 and names == sorted(names):
        later = [m for m in lines if m.group(1) > name]
        if later:
            return later[0].start()
    return lines[-1].end()


def add_kernel_function(text: str, *, stub: str, function: str, kernel: str, iterator: str,
                        kind: str, source: str | None = None) -> str:
    """`source`: the kernel function's text when it is not the plain one (scalar parameters)."""
    host = HostFile(text)
    if any(r.stub == stub for r in host.dispatch_registrations):
        return text
    if source is None:
        template = "unary_host_kernel.mm.j2" if kind == "unary" else "binary_host_kernel.mm.j2"
        source = render(template, function=function, iterator=iterator, kernel=kernel)
    if function not in host.kernel_functions:
        at = _after_last_kernel_function(host)
        text = text[:at] + "\n" + source + text[at:] if at is not None else text
        if at is None:
            end = host.namespace_end
            if end < 0:
                raise ValueError(NO_NAMESPACE_END)
            text = text[:end] + source + "\n" + text[end:]
        host = HostFile(text)
    semicolon = _registration_style(host)
    ampersand = "&" if _takes_address(host) else ""
    line = f"REGISTER_DISPATCH({stub}, {ampersand}{function}){semicolon}\n"
    registrations = list(re.finditer(r"^REGISTER_DISPATCH\((\w+)[^\n]*\n", host.mask, re.M))
    at = _list_place(registrations, stub) if registrations else host.namespace_end
    if at < 0:
        raise ValueError(NO_NAMESPACE_END)
    return text[:at] + line + text[at:]


def _after_last_kernel_function(host: HostFile) -> int | None:
    # a function whose kernel name is computed (gelu_kernel's ternary) is a kernel function too
    functions = [f for f in host.kernel_functions.values()
                 if f.kernels or EXEC_CALL_RE.search(host.mask, f.start, f.end)]
    if not functions:
        return None
    end = max(f.end for f in functions)
    return host.text.index("\n", end) + 1


def kernel_function_name(text: str, kernel: str) -> str:
    """The host function a port adds, named as most of the file's registered ones: BinaryKernel.mm's
    `atan2_mps_kernel`, ActivationKernel.mm's and UnaryKernel.mm's `hardshrink_kernel` (a name
    the file already uses for something else keeps porter's `_mps_kernel`)."""
    host = HostFile(text)
    registered = re.findall(r"^REGISTER_DISPATCH\(\w+,\s*&?\s*(\w+)\)", host.mask, re.M)
    plain = f"{kernel}_kernel"
    named_plain = sum(1 for f in registered if f.endswith("_kernel") and not f.endswith("_mps_kernel"))
    if named_plain * 2 > len(registered) and not re.search(rf"\b{re.escape(plain)}\b", host.mask):
        return plain
    return f"{kernel}_mps_kernel"


def _takes_address(host: HostFile) -> bool:
    """Upstream writes `REGISTER_DISPATCH(stub, &fn)` in BinaryKernel.mm and `(stub, fn)` in
    ActivationKernel.mm and UnaryKernel.mm: follow most of the file's (`&` where it has none)."""
    lines = re.findall(r"^REGISTER_DISPATCH\(\w+,\s*(&?)", host.mask, re.M)
    return lines.count("&") * 2 >= len(lines) if lines else True


def _registration_style(host: HostFile) -> str:
    """Upstream mixes `REGISTER_DISPATCH(...)` with and without `;`: follow the last one."""
    lines = re.findall(r"^REGISTER_DISPATCH\([^\n]*\)(;?)", host.mask, re.M)
    return lines[-1] if lines else ";"


def include_stub_header(text: str, header: str) -> str:
    """REGISTER_DISPATCH needs the stub's DECLARE_DISPATCH in scope: mish_stub is declared in
    ATen/native/Activation.h, which UnaryKernel.mm does not include (a Mac fails the build with
    'use of undeclared identifier'). Add the include among the file's own ATen/native ones."""
    path = header.removeprefix("aten/src/")
    if not path.startswith("ATen/") or re.search(rf"^#include\s*[<\"]{re.escape(path)}[>\"]",
                                                 text, re.M):
        return text
    line = f"#include <{path}>\n"
    first_if = re.search(r"^#\s*if", text, re.M)
    limit = first_if.start() if first_if else len(text)
    natives = [m for m in re.finditer(r"^#include <(ATen/native/[^>]*)>[^\n]*\n", text, re.M)
               if m.start() < limit]
    if not natives:
        includes = [m for m in re.finditer(r"^#include [^\n]*\n", text, re.M) if m.start() < limit]
        if not includes:
            return line + text
        return text[:includes[-1].end()] + line + text[includes[-1].end():]
    before = [m for m in natives if m.group(1) < path]
    at = before[-1].end() if before else natives[0].start()
    return text[:at] + line + text[at:]


def ensure_include(text: str, header: str) -> str:
    """`#include <header>` after the file's last `#include <ATen/...>` line, unless present."""
    line = f"#include <{header}>"
    if re.search(rf"^{re.escape(line)}\s*$", text, re.M):
        return text
    last = None
    stop = text.find("\nnamespace ")
    # before the namespace and outside the `#ifndef PYTORCH_JIT_COMPILE_SHADERS` block
    for m in re.finditer(r"^#include <ATen/[^\n]*\n", text[:stop if stop >= 0 else len(text)], re.M):
        last = m
    if last is None:
        return line + "\n" + text
    return text[:last.end()] + line + "\n" + text[last.end():]


def new_family_file(template_text: str, template_family: str, family: str, stub_header: str) -> str:
    """A host file for a kernel family that has none yet (ActivationKernel.mm), with the preamble
    of an existing one (includes, the bundled library, the namespace)."""
    end = template_text.find("#endif", template_text.find("getBundledLibrary"))
    if end < 0:
        raise ValueError(f"{template_family}.mm has no bundled-library block to copy")
    preamble = template_text[:template_text.index("\n", end) + 1].replace(template_family, family)
    preamble = re.sub(r"^#include <ATen/native/mps/kernels/[^\n]*\n", "", preamble, flags=re.M)
    preamble = re.sub(r"^#include <ATen/native/(?!mps/)\w+\.h>\n",
                      f"#include <ATen/native/{stub_header}>\n", preamble, count=1, flags=re.M)
    # only what the new file uses: what its functions need comes with them (uses_includes)
    preamble = re.sub(r"^#include <fmt/format\.h>\n", "", preamble, flags=re.M)
    return preamble + "\n} // namespace at::native\n"


# What generated host code may use, and the header that declares it
USED_INCLUDES = (("AT_DISPATCH_", "ATen/Dispatch.h"), ("fmt::", "fmt/format.h"))


def uses_includes(text: str) -> str:
    """The headers of what the file's code uses (`AT_DISPATCH_*`: ATen/Dispatch.h), included."""
    for used, header in USED_INCLUDES:
        if used in text and not re.search(rf"^#include <{re.escape(header)}>", text, re.M):
            text = ensure_include(text, header) if header.startswith("ATen/") else \
                text.replace("\nnamespace at::native {", f"\n#include <{header}>\n\nnamespace at::native {{", 1)
    return text
