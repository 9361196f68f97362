"""What an Objective-C++ host file under `mps/operations/` defines and registers."""

from __future__ import annotations

import re
from functools import cached_property
from typing import NamedTuple

from porter.source.cpp_scan import SourceFile, blank_inactive, code_mask, line_of, matching_close

REGISTER_DISPATCH_RE = re.compile(r"^[ \t]*REGISTER_(?:MPS_)?DISPATCH\(\s*(\w+)\s*,\s*&?\s*([\w:]+)\s*\)", re.M)
TI_DISPATCH_RE = re.compile(r"^[ \t]*REGISTER_UNARY_TI_DISPATCH\(\s*(\w+)\s*\)", re.M)
MPS_UNARY_STUB_RE = re.compile(r"^[ \t]*REGISTER_MPS_UNARY_STUB\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
FUNCTION_RE = re.compile(r"^(?:static\s+)?(?:inline\s+)?void\s+(\w+)\s*\(([^)]*)\)\s*\{", re.M)
EXEC_RE = re.compile(r"\bexec_(unary|binary|ternary)_kernel(_with_params)?\s*(?:<[^>]*>)?\s*\(\s*[^,]+,\s*\"(\w+)\"")
NAMESPACE_END_RE = re.compile(r"^\}\s*//\s*namespace at::native\s*$", re.M)


class Registration(NamedTuple):
    stub: str
    function: str
    line: int
    via_macro: bool     # REGISTER_UNARY_TI_DISPATCH(NAME) or REGISTER_MPS_UNARY_STUB
    # the preprocessor condition porter cannot decide that holds it (`#ifdef FLAG`), or "":
    # a build that does not define it registers nothing
    condition: str = ""


class KernelCall(NamedTuple):
    """One `lib.exec_<kind>_kernel[_with_params](iter, "name", ...)` in a host function."""

    kind: str                     # unary | binary | ternary
    kernel: str
    with_params: bool             # a params struct travels with the call


class KernelFunction(NamedTuple):
    name: str
    params: str
    start: int
    end: int            # just past the closing brace
    line: int
    calls: tuple[KernelCall, ...]

    @property
    def kernels(self) -> tuple[str, ...]:
        """Metal kernel names passed to exec_*_kernel."""
        return tuple(c.kernel for c in self.calls)


class HostFile(SourceFile):
    @cached_property
    def mask(self) -> str:
        # what the preprocessor drops (`#if 0`, the `#else` of `#if 1`) registers nothing: a
        # REGISTER_DISPATCH there leaves the stub without an MPS kernel, as on a Mac
        return blank_inactive(code_mask(self.text))

    @cached_property
    def dispatch_registrations(self) -> list[Registration]:
        found = [(m.group(1), m.group(2), line_of(self.text, m.start()), False)
                 for m in REGISTER_DISPATCH_RE.finditer(self.mask)
                 if not self.in_define(m.start())]
        found += [(f"{name}_stub", f"{name}_kernel_mps", line, True)
                  for name, line in self.ti_dispatches]
        return [Registration(*r, self.condition_at_line(r[2]) if self.undecided else "")
                for r in found]

    @cached_property
    def ti_dispatches(self) -> list[tuple[str, int]]:
        """REGISTER_UNARY_TI_DISPATCH(NAME) lines: (NAME, line)."""
        return [(m.group(1), line_of(self.text, m.start())) for m in TI_DISPATCH_RE.finditer(self.mask)
                if not self.in_define(m.start())]

    @cached_property
    def undecided(self) -> list[tuple[int, int, str]]:
        from porter.source.cpp_scan import undecided_spans
        return undecided_spans(self.mask)

    def condition_at_line(self, line: int) -> str:
        """The preprocessor condition porter cannot decide that holds `line` (1-based), or ""."""
        offset = sum(len(x) + 1 for x in self.text.split("\n")[:line - 1])
        for start, end, condition in self.undecided:
            if start <= offset < end:
                return condition
        return ""

    @property
    def ti_dispatch_names(self) -> list[str]:
        return [name for name, _ in self.ti_dispatches]

    @cached_property
    def mpsgraph_stubs(self) -> dict[str, tuple[str, int]]:
        """REGISTER_MPS_UNARY_STUB(op, selector): op -> (selector, line)."""
        return {m.group(1): (m.group(2), line_of(self.text, m.start()))
                for m in MPS_UNARY_STUB_RE.finditer(self.mask) if not self.in_define(m.start())}

    @cached_property
    def kernel_functions(self) -> dict[str, KernelFunction]:
        out = {}
        for m in FUNCTION_RE.finditer(self.mask):
            open_at = m.end() - 1
            close = matching_close(self.mask, open_at)
            if close < 0:
                continue
            body = self.text[open_at:close]
            calls = tuple(KernelCall(kind, kernel, bool(params))
                          for kind, params, kernel in EXEC_RE.findall(body))
            out[m.group(1)] = KernelFunction(m.group(1), " ".join(m.group(2).split()), m.start(),
                                             close + 1, line_of(self.text, m.start()), calls)
        return out

    def kernels_of_stub(self, stub: str) -> tuple[str, ...]:
        """Metal kernel names the registered function of `stub` passes to exec_*_kernel."""
        for reg in self.dispatch_registrations:
            if reg.stub == stub:
                if reg.via_macro:
                    return (reg.stub[:-len("_stub")],)
                fn = self.kernel_functions.get(reg.function.split("::")[-1])
                return fn.kernels if fn else ()
        return ()

    @cached_property
    def namespace_end(self) -> int:
        """Offset of the line `} // namespace at::native`, or -1."""
        matches = list(NAMESPACE_END_RE.finditer(self.text))
        return matches[-1].start() if matches else -1
