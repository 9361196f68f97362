"""What an Objective-C++ host file under `mps/operations/` defines and registers."""

from __future__ import annotations

import re
from functools import cached_property
from typing import NamedTuple

from porter.source.cpp_scan import (SourceFile, blank_inactive, blank_spans, code_mask,
                                    comments_blanked, inactive_spans, line_of, matching_close,
                                    split_top_level)
from porter.source.host_names import constant_string

REGISTER_DISPATCH_RE = re.compile(r"^[ \t]*REGISTER_(?:MPS_)?DISPATCH\(\s*(\w+)\s*,\s*&?\s*([\w:]+)\s*\)", re.M)
TI_DISPATCH_RE = re.compile(r"^[ \t]*REGISTER_UNARY_TI_DISPATCH\(\s*(\w+)\s*\)", re.M)
MPS_UNARY_STUB_RE = re.compile(r"^[ \t]*REGISTER_MPS_UNARY_STUB\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
FUNCTION_RE = re.compile(r"^(?:static\s+)?(?:inline\s+)?void\s+(\w+)\s*\(([^)]*)\)\s*\{", re.M)
# `exec_<kind>_kernel[_with_params][<T>](`: read in the code mask, so a call in a comment or in
# code the preprocessor drops is no call
EXEC_CALL_RE = re.compile(r"\bexec_(unary|binary|ternary)_kernel(_with_params)?\s*(?:<[^>]*>)?\s*\(")
# the same word in the raw text: a call someone disabled, for the message that says so
EXEC_WORD_RE = re.compile(r"\bexec_(?:unary|binary|ternary)_kernel\w*\s*(?:<[^>]*>)?\s*\(")
RETURN_RE = re.compile(r"\breturn\b")
# a name argument that does not start as a string literal does (one that does and is no
# literal, `"a" + x`, leaves the function without that call: hostmap's other messages)
_NOT_A_LITERAL = re.compile(r'(?!R")[^\s",)]')
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
    arguments: tuple[str, ...] = ()     # what follows the iterator and the name, as written
    line: int = 0
    # the line of the function's unconditional `return` before the call (it never runs), or 0
    after_return: int = 0
    # the preprocessor condition porter cannot decide that holds the call (`#if FLAG`), or ""
    condition: str = ""


class KernelFunction(NamedTuple):
    name: str
    params: str
    start: int
    end: int            # just past the closing brace
    line: int
    calls: tuple[KernelCall, ...]
    # lines of exec_*_kernel calls in the text that the compiler never sees: in a comment, or
    # under `#if 0`
    disabled: tuple[int, ...] = ()
    # the name arguments, as written, of calls whose name is no string porter can read (a
    # variable, a helper's answer): chosen at run time (hostmap: not proven)
    computed: tuple[str, ...] = ()

    @property
    def kernels(self) -> tuple[str, ...]:
        """Metal kernel names passed to exec_*_kernel."""
        return tuple(c.kernel for c in self.calls)

    @property
    def running_calls(self) -> tuple[KernelCall, ...]:
        """The calls a run of the function can reach (none after its unconditional return)."""
        return tuple(c for c in self.calls if not c.after_return)


class HostFile(SourceFile):
    @cached_property
    def mask(self) -> str:
        # what the preprocessor drops (`#if 0`, the `#else` of `#if 1`) registers nothing: a
        # REGISTER_DISPATCH there leaves the stub without an MPS kernel, as on a Mac
        return blank_inactive(code_mask(self.text))

    @cached_property
    def live_text(self) -> str:
        """The text as the compiler reads it: comments and what the preprocessor drops blanked,
        string literals kept (offsets kept)."""
        return blank_spans(comments_blanked(self.text), inactive_spans(code_mask(self.text)))

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
        return self.condition_at_offset(sum(len(x) + 1 for x in self.text.split("\n")[:line - 1]))

    def condition_at_offset(self, offset: int) -> str:
        """The preprocessor condition porter cannot decide that holds `offset`, or ""."""
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
            returns = self._unconditional_returns(open_at, close)
            calls, live, computed = [], set(), []
            for call in EXEC_CALL_RE.finditer(self.mask, open_at, close):
                end = matching_close(self.mask, call.end() - 1)
                if end < 0:
                    continue
                live.add(call.start())
                args = split_top_level(self.live_text[call.end():end])
                # the literal as the compiler reads it: "heavi" "side", "heavi\x73ide", R"(heaviside)"
                value = constant_string(args[1], self.live_text, open_at, call.start()) \
                    if len(args) > 1 else None
                if value is None and len(args) > 1 and _NOT_A_LITERAL.match(args[1]):
                    computed.append(" ".join(args[1].split()))
                joined = value or ""
                # the host passes it as a `const std::string&`, built from the char array: it
                # ends at the first NUL (review 17's C04, C09)
                joined = joined.split("\0", 1)[0]
                if not joined:
                    continue        # a name computed at run time (hostmap: not proven)
                before = [line for at, line in returns if at < call.start()]
                calls.append(KernelCall(call.group(1), joined, bool(call.group(2)),
                                        tuple(args[2:]), line_of(self.text, call.start()),
                                        before[0] if before else 0,
                                        self.condition_at_offset(call.start())))
            disabled = tuple(line_of(self.text, w.start())
                             for w in EXEC_WORD_RE.finditer(self.text, open_at, close)
                             if w.start() not in live)
            out[m.group(1)] = KernelFunction(m.group(1), " ".join(m.group(2).split()), m.start(),
                                             close + 1, line_of(self.text, m.start()), tuple(calls),
                                             disabled, tuple(computed))
        return out

    def _unconditional_returns(self, open_at: int, close: int) -> list[tuple[int, int]]:
        """(end of statement, line) of each `return` that every run reaching it takes: among
        the function body's own statements, or inside blocks that run once whenever reached
        (`{ ... }`, `do { ... } while (0)`), with no `if`/`else`/loop guarding it. What follows
        it never runs."""
        found, plain, statement = [], [], open_at + 1
        for m in re.finditer(r"[{}();]|\breturn\b", self.mask[open_at + 1:close]):
            tok, at = m.group(), open_at + 1 + m.start()
            if tok == "(":
                plain.append(False)
            elif tok == "{":
                plain.append(all(plain) and self._runs_once(self.mask[statement:at].strip(), at))
            elif tok in ")}":
                if plain:
                    plain.pop()
            elif tok == "return" and all(plain):
                head = self.mask[statement:at].strip()
                # `if (c) return;`, `else return;`: guarded, as is one in a loop's single statement
                guarded = head.endswith(")") or re.search(r"\b(?:else|do)$", head)
                end = self.mask.find(";", at, close)
                if not guarded and end >= 0:
                    found.append((end, line_of(self.text, at)))
            if all(plain) and tok in "{};":
                statement = at + 1
        return found

    def _runs_once(self, head: str, brace: int) -> bool:
        """Whether the block opening at `brace`, after `head` in its statement, runs once
        whenever reached: a bare `{ }`, or `do { } while (0);` with no `break`/`continue`."""
        if head == "":
            return True
        if head != "do":
            return False
        end = matching_close(self.mask, brace)
        return end > 0 and re.match(r"\s*while\s*\(\s*(?:0|false)\s*\)\s*;", self.mask[end + 1:]) is not None \
            and re.search(r"\b(?:break|continue)\b", self.mask[brace:end]) is None

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
