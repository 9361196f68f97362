"""Everything the checks read, loaded once per run and shared (each file read and scanned once).

Each fact is a cached property, so a run that skips a check family never pays for its inputs.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

from porter.source import checkout as co
from porter.source import native_yaml
from porter.checks.opinfo_index import OpInfoIndex
from porter.source.cpp_scan import line_of, matching_close, split_top_level
from porter.source.host_scan import HostFile
from porter.source.metal_scan import MetalFile
from porter.source.stubs import Stub, parse_header
from porter.source.xfail_lists import XfailEntry
from porter.source.xfail_lists import complex_supported
from porter.source.xfail_lists import entries as dict_entries

FUNC_NAME_RE = re.compile(r"^- func:\s*([A-Za-z0-9_]+)", re.M)
MPS_ROW_RE = re.compile(r"^ {4,}[A-Za-z0-9_, ]*\bMPS\b[A-Za-z0-9_, ]*:", re.M)
METALLIB_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<ATen/native/mps/(\w+)_metallib\.h>", re.M)
EXEC_CALL_RE = re.compile(r"\bexec_(?:unary|binary|ternary)_kernel(?:_with_params)?\s*(?:<[^>]*>)?\s*\(")
STRING_RE = re.compile(r'^"(\w+)"$')
MPS_SOURCES = ("*.mm", "*.cpp")


class Tree:
    def __init__(self, checkout: co.Checkout):
        self.checkout = checkout
        self.notes: list[str] = []
        self.set_lists: set[tuple[str, str]] = set()     # (function, name) of set-literal lists
        # What `--changed-since` found changed (porter.checks.changed.Changes), else None: where
        # two lines clash, the changed one is the finding's line.
        self.changes = None

    def read(self, rel: str) -> str:
        return self.checkout.read(rel)

    def original(self, copies: list, where=lambda copy: copy):
        """Of clashing copies (in path, line order), the one that stands as the original: the
        first whose (path, line) = `where(copy)` is not on a changed line, else the first. A
        finding then goes on every other copy, where the change made the clash."""
        if self.changes is not None:
            for copy in copies:
                if not self.changes.touches(*where(copy)):
                    return copy
        return copies[0]

    # --- native_functions.yaml -------------------------------------------------------------
    @cached_property
    def yaml_text(self) -> str:
        return self.read(co.NATIVE_YAML)

    @cached_property
    def entries(self) -> list[native_yaml.Entry]:
        return native_yaml.scan(self.yaml_text)

    @cached_property
    def families(self) -> dict[str, list[native_yaml.Entry]]:
        """Op base name (in-place `op_` folded into `op`) -> its entries."""
        out: dict[str, list[native_yaml.Entry]] = {}
        for e in self.entries:
            out.setdefault(op_of_entry(e), []).append(e)
        return out

    @cached_property
    def op_names(self) -> set[str]:
        """Every op base name, without scanning the entries (a regex over the text)."""
        return {_op_name(n) for n in FUNC_NAME_RE.findall(self.yaml_text)}

    @cached_property
    def mps_entries(self) -> list[native_yaml.Entry]:
        """The entries with a dispatch row naming MPS, scanned alone (a sixth of the file)."""
        text = self.yaml_text
        starts = sorted({text.rfind("\n- func:", 0, m.start()) + 1 for m in MPS_ROW_RE.finditer(text)})
        found, line, counted = [], 0, 0
        for start in starts:
            line += text.count("\n", counted, start)
            counted = start
            end = text.find("\n- func:", start)
            end = len(text) if end < 0 else end + 1
            for e in native_yaml.scan(text[start:end])[:1]:
                found.append(native_yaml.Entry(e.name, e.overload, e.start + line, e.end + line, e.lines))
        return found

    def mps_family(self, op: str) -> list[native_yaml.Entry]:
        return [e for e in self.mps_entries if op_of_entry(e) == op]

    def entry_at(self, line: int) -> native_yaml.Entry | None:
        """The entry holding 1-based `line`, scanned alone."""
        text = self.yaml_text
        offset = _offset_of_line(text, line)
        if offset is None:
            return None
        start = text.rfind("\n- func:", 0, offset + len("\n- func:") - 1) + 1
        if not text.startswith("- func:", start):
            return None
        end = text.find("\n- func:", start)
        end = len(text) if end < 0 else end + 1
        first = text.count("\n", 0, start)
        for e in native_yaml.scan(text[start:end])[:1]:
            entry = native_yaml.Entry(e.name, e.overload, e.start + first, e.end + first, e.lines)
            return entry if entry.start < line <= entry.end else None
        return None

    def to_op(self, name: str | None) -> str | None:
        """An aten op name for a kernel, stub or OpInfo spelling, when one exists."""
        if not name:
            return None
        name = name.replace(".", "_")
        if name in self.op_names:
            return name
        parts = name.split("_")
        for k in range(len(parts) - 1, 0, -1):
            prefix = "_".join(parts[:k])
            if prefix in self.op_names:
                return prefix
        return None

    # --- host files (mps/operations/*.mm) ---------------------------------------------------
    @cached_property
    def hosts(self) -> dict[str, HostFile]:
        return {rel: HostFile(self.read(rel), rel) for rel in self.checkout.glob(co.OPERATIONS, "*.mm")}

    @cached_property
    def metals(self) -> dict[str, MetalFile]:
        return {rel: MetalFile(self.read(rel), rel) for rel in self.checkout.glob(co.KERNELS, "*.metal")}

    @cached_property
    def pairs(self) -> dict[str, list[str]]:
        """Host file -> the .metal files it can load in JIT-shader builds.

        The `#include <ATen/native/mps/<Stem>_metallib.h>` lines say which; a host file
        without one pairs with the .metal of its own stem.
        """
        out = {}
        for rel, host in self.hosts.items():
            stems = METALLIB_INCLUDE_RE.findall(host.text) or [_stem(rel)]
            out[rel] = [f"{co.KERNELS}/{s}.metal" for s in stems if f"{co.KERNELS}/{s}.metal" in self.metals]
        return out

    @cached_property
    def metal_hosts(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {rel: [] for rel in self.metals}
        for host, metals in self.pairs.items():
            for m in metals:
                out[m].append(host)
        return out

    @cached_property
    def kernel_uses(self) -> dict[str, list[tuple[str, int, str | None]]]:
        """Host file -> (kernel name, line, enclosing static function) it runs.

        Literal names passed to `exec_*_kernel` anywhere in the file (stub kernels and
        pattern-B impls alike) and the names of `REGISTER_UNARY_TI_DISPATCH(NAME)`.
        """
        out = {}
        for rel, host in self.hosts.items():
            uses = []
            functions = sorted(host.kernel_functions.values(), key=lambda f: f.start)
            for m in EXEC_CALL_RE.finditer(host.mask):
                if host.in_define(m.start()):
                    continue
                close = matching_close(host.mask, m.end() - 1)
                args = split_top_level(host.text[m.end():close]) if close > 0 else []
                name = STRING_RE.match(args[1]) if len(args) > 1 else None
                if name:
                    fn = next((f.name for f in functions if f.start <= m.start() < f.end), None)
                    uses.append((name.group(1), line_of(host.text, m.start()), fn))
            for name, line in host.ti_dispatches:
                uses.append((name, line, f"{name}_kernel_mps"))
            out[rel] = uses
        return out

    @cached_property
    def registrations(self) -> list[tuple[str, str, int, str, bool]]:
        """Every MPS stub registration: (stub, host file, line, function, via macro).

        `REGISTER_MPS_UNARY_STUB(op, selector)` registers `op_stub` too (with an MPSGraph kernel).
        """
        out = []
        for rel, host in self.hosts.items():
            for r in host.dispatch_registrations:
                out.append((r.stub, rel, r.line, r.function, r.via_macro))
            for op, (_, line) in host.mpsgraph_stubs.items():
                out.append((f"{op}_stub", rel, line, f"mps_{op}_kernel", True))
        return sorted(out, key=lambda r: (r[1], r[2]))

    @cached_property
    def conditional_registrations(self) -> dict[str, list[tuple[str, int, str]]]:
        """stub -> (host file, line, condition) of each MPS registration under a preprocessor
        condition porter cannot decide (`#ifdef FLAG`): not proven to register anything."""
        out: dict[str, list[tuple[str, int, str]]] = {}
        for rel, host in self.hosts.items():
            for r in host.dispatch_registrations:
                if r.condition:
                    out.setdefault(r.stub, []).append((rel, r.line, r.condition))
        return out

    def unconditionally_registered(self, stub: str) -> bool:
        """Whether some MPS registration of `stub` holds whatever the build defines."""
        at = {(rel, line) for rel, line, _ in self.conditional_registrations.get(stub, [])}
        return any(s == stub and (rel, line) not in at for s, rel, line, _, _ in self.registrations)

    def stub_op(self, stub: str) -> str | None:
        return self.to_op(stub[:-len("_stub")] if stub.endswith("_stub") else stub)

    @cached_property
    def kernel_op_lists(self) -> dict[str, list[str]]:
        """Metal kernel name -> every aten op whose stub runs it, in the hosts' order: a kernel
        several stubs share (upstream's shrink_backward runs hardshrink_backward and
        softshrink_backward) runs them all, and a change to it is a change to each."""
        out: dict[str, list[str]] = {}
        functions = {}
        for rel, host in self.hosts.items():
            for r in host.dispatch_registrations:
                functions[(rel, r.function.split("::")[-1])] = r.stub
        for rel, uses in self.kernel_uses.items():
            for kernel, _, fn in uses:
                stub = functions.get((rel, fn))
                op = self.stub_op(stub) if stub else None
                if op and op not in out.setdefault(kernel, []):
                    out[kernel].append(op)
        for kernel in {k for m in self.metals.values() for k in m.kernels()}:
            if not out.get(kernel) and self.to_op(kernel):
                out[kernel] = [self.to_op(kernel)]
        return {k: ops for k, ops in out.items() if ops}

    @cached_property
    def kernel_ops(self) -> dict[str, str]:
        """Metal kernel name -> the first aten op whose stub runs it (kernel_op_lists: all)."""
        return {kernel: ops[0] for kernel, ops in self.kernel_op_lists.items()}

    def ops_of(self, kernel: str, guess: bool = True) -> list[str]:
        """Every op whose stub runs `kernel`; else the op its name spells (where `guess`), else
        the name itself: what a change to the kernel touches."""
        return list(self.kernel_op_lists.get(kernel, ())) or \
            [(self.to_op(kernel) if guess else None) or kernel]

    # --- other mps sources: where `MPS: x_mps` functions are defined -------------------------
    @cached_property
    def mps_source_texts(self) -> dict[str, str]:
        rels: list[str] = []
        for pattern in MPS_SOURCES:
            rels += self.checkout.glob(co.MPS, f"**/{pattern}")
        return {rel: self.read(rel) for rel in sorted(set(rels))}

    # --- DispatchStubs ----------------------------------------------------------------------
    @cached_property
    def stubs(self) -> dict[str, Stub]:
        """Stubs declared in aten/src/ATen/native/*.h (see `stub` for subfolders)."""
        return self._stubs_in(self.checkout.glob(co.NATIVE, "*.h"))

    @cached_property
    def _more_stubs(self) -> dict[str, Stub]:
        return self._stubs_in([rel for rel in self.checkout.glob(co.NATIVE, "*/**/*.h")])

    def stub(self, name: str) -> Stub | None:
        """A declared stub; subfolder headers (transformers/, cpu/, ...) are read on a miss only."""
        return self.stubs.get(name) or self._more_stubs.get(name)

    def declared_stub_names(self) -> list[str]:
        return sorted(set(self.stubs) | set(self._more_stubs))

    def _stubs_in(self, rels: list[str]) -> dict[str, Stub]:
        out: dict[str, Stub] = {}
        for rel in rels:
            text = self.read(rel)
            if "DECLARE_DISPATCH" in text:
                for name, stub in parse_header(text, rel).items():
                    out.setdefault(name, stub)
        return out

    # --- OpInfos and expectations -----------------------------------------------------------
    @cached_property
    def opinfos(self) -> OpInfoIndex:
        return OpInfoIndex(self.checkout)

    @cached_property
    def common_mps_tree(self) -> ast.Module | None:
        if not self.checkout.exists(co.COMMON_MPS):
            return None
        try:
            return ast.parse(self.read(co.COMMON_MPS))
        except SyntaxError as err:
            self.notes.append(f"{co.COMMON_MPS}:{err.lineno}: does not parse; expectation checks skipped")
            return None

    @cached_property
    def expectation_entries(self) -> list[XfailEntry]:
        """Dict entries and set elements of the expectation lists, scoped to their function."""
        tree = self.common_mps_tree
        if tree is None:
            return []
        found = dict_entries(self.read(co.COMMON_MPS), co.COMMON_MPS, tree, sets=True)
        self.set_lists = {(e.function, e.dict_name) for e in found if e.in_set}
        return sorted(found, key=lambda e: (e.line, e.key_col))

    @cached_property
    def output_xfails(self) -> dict[str, list[XfailEntry]]:
        """Key -> the mps_ops_modifier entries that xfail or skip its output test."""
        out: dict[str, list[XfailEntry]] = {}
        for e in self.expectation_entries:
            if e.function == "mps_ops_modifier" and (e.function, e.dict_name) not in self.set_lists:
                out.setdefault(e.key, []).append(e)
        return out

    @cached_property
    def supported_complex(self) -> set[str]:
        return complex_supported(self.expectation_entries)


def op_of_entry(entry: native_yaml.Entry) -> str:
    return _op_name(entry.name)


def _op_name(name: str) -> str:
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _offset_of_line(text: str, line: int) -> int | None:
    pos = 0
    for _ in range(line - 1):
        pos = text.find("\n", pos) + 1
        if pos == 0:
            return None
    return pos


def _stem(rel: str) -> str:
    return rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]


