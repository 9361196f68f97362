"""What changed since a git ref: changed lines per file, the names they mention, the ops they touch.

`porter check --changed-since REF` keeps the findings that sit on a changed line or concern
an op the change touches, so a PR is judged on what it did, not on the tree's old debts.
Ops are found two ways: the structure around each changed line (the yaml entry, functor,
host kernel function, stub declaration, expectation entry or OpInfo call it falls in) and
the names written on added or removed lines (a deleted `REGISTER_UNARY_OP(sinc, ...)` line
touches sinc, though nothing named sinc remains on a changed line).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from porter.source import checkout as co
from porter.checks.tree import Tree, op_of_entry
from porter.errors import PorterError

HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
NAME_RE = re.compile(r"(?<![\w:.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
SUFFIXES = ("_functor", "_stub", "_mps_kernel", "_kernel_mps", "_out_mps", "_kernel", "_mps", "_out")


@dataclass
class Changes:
    ref: str
    lines: dict[str, set[int]] = field(default_factory=dict)   # path -> added/changed lines (new side)
    deletions: dict[str, set[int]] = field(default_factory=dict)   # path -> lines that lost lines after them
    names: set[str] = field(default_factory=set)               # normalised names on +/- lines

    @property
    def files(self) -> set[str]:
        return set(self.lines)

    def touches(self, path: str, line: int | None) -> bool:
        changed = self.lines.get(path)
        if changed is None:
            return False
        return line is None or line in changed


def since(root: Path, ref: str) -> Changes:
    """Lines changed between `ref` and the working tree (untracked files count as new)."""
    if not ref or ref.startswith("-"):
        raise PorterError(f"--changed-since {ref!r}: not a git ref", hint="e.g. origin/main or HEAD~1")
    _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
         error=f"--changed-since {ref}: unknown revision",
         hint="fetch it first (git fetch origin main) or pass a commit")
    diff = _git(root, "-c", "core.quotepath=off", "diff", "--no-color", "--no-ext-diff", "-U0",
                "--relative", ref, "--")
    changes = parse_diff(diff, ref)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard")
    for rel in filter(None, untracked.splitlines()):
        text = (root / rel).read_text(encoding="utf-8", errors="replace") if (root / rel).is_file() else ""
        count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        changes.lines[rel] = set(range(1, count + 1))
        changes.names |= names_in(text)
    return changes


def parse_diff(diff: str, ref: str = "") -> Changes:
    changes = Changes(ref)
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip()
            path = target[2:] if target.startswith("b/") else None
            if path is not None:
                changes.lines.setdefault(path, set())
                changes.deletions.setdefault(path, set())
        elif line.startswith("--- ") or line.startswith("diff --git"):
            continue
        elif line.startswith("@@"):
            m = HUNK_RE.match(line)
            if m and path is not None:
                start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
                if count:
                    changes.lines[path].update(range(start, start + count))
                else:    # pure deletion after line `start`
                    changes.deletions[path].add(start)
        elif line[:1] in "+-":
            changes.names |= names_in(line[1:])
    return changes


def names_in(text: str) -> set[str]:
    """Identifiers and dotted names, with their op-ish spellings (`sinc_functor` -> `sinc`)."""
    out = set()
    for token in NAME_RE.findall(text):
        forms = {token, token.replace(".", "_"), token.split(".")[0]}
        for form in list(forms):
            for suffix in SUFFIXES:
                if form.endswith(suffix) and len(form) > len(suffix):
                    forms.add(form[:-len(suffix)])
        out |= forms
    for literal in re.findall(r'"([A-Za-z_][\w.]*)"', text):
        out |= {literal, literal.replace(".", "_")}
    return out


def touched_ops(tree: Tree, changes: Changes) -> set[str]:
    """Aten ops (yaml base names) the change touches, by name and by structure."""
    found: set[str] = set()
    for name in changes.names:
        found.add(tree.kernel_ops.get(name, name))
    for path, lines in changes.lines.items():
        found |= _structural(tree, path, Touch(lines, changes.deletions.get(path, set())))
    return {op for op in found if op in tree.op_names}


@dataclass(frozen=True)
class Touch:
    """Changed lines of one file, asked whether a structure spanning lines [first, last] changed."""

    lines: set[int]
    deletions: set[int]

    def __contains__(self, line: int) -> bool:
        return line in self.lines

    def __iter__(self):
        return iter(sorted(self.lines | self.deletions))

    def __bool__(self) -> bool:
        return bool(self.lines or self.deletions)

    def span(self, first: int, last: int) -> bool:
        # a deletion counts only inside the span: deleting a line between two one-line
        # registrations touches neither of them
        return (any(first <= line <= last for line in self.lines)
                or any(first <= d < last for d in self.deletions))


def _structural(tree: Tree, path: str, lines: Touch) -> set[str]:
    out: set[str] = set()
    if not lines:
        return out
    if path == co.NATIVE_YAML:
        for e in tree.entries:
            if lines.span(e.start + 1, e.end):
                out.add(op_of_entry(e))
    elif path in tree.metals:
        metal = tree.metals[path]
        text = metal.text
        for name, (start, end) in metal.functor_spans.items():
            first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1
            if lines.span(first, last):
                out.add(tree.kernel_ops.get(name) or tree.to_op(name) or name)
        for reg in metal.registrations:
            if reg.line in lines:
                out.add(tree.kernel_ops.get(reg.kernel) or tree.to_op(reg.kernel) or reg.kernel)
    elif path in tree.hosts:
        host = tree.hosts[path]
        stubs = {r.function.split("::")[-1].lstrip("&"): r.stub for r in host.dispatch_registrations}
        for fn in host.kernel_functions.values():
            last = host.text.count("\n", 0, fn.end) + 1
            if lines.span(fn.line, last):
                out |= {tree.kernel_ops.get(k, k) for k in fn.kernels}
                if fn.name in stubs:
                    out.add(tree.stub_op(stubs[fn.name]) or "")
        for stub, rel, line, _, _ in tree.registrations:
            if rel == path and line in lines:
                out.add(tree.stub_op(stub) or "")
        for kernel, line, _ in tree.kernel_uses.get(path, []):
            if line in lines:
                out.add(tree.kernel_ops.get(kernel, kernel))
    elif path == co.COMMON_MPS:
        for e in tree.expectation_entries:
            if lines.span(e.line, e.end_line):
                heads = tree.opinfos.by_key.get(e.key, [])
                out |= {h.aten for h in heads} or {tree.to_op(e.key) or ""}
    elif path.endswith(".py") and (path == co.OPINFO_DB or path.startswith(co.OPINFO_DEFINITIONS)):
        for line in lines:
            head = tree.opinfos.at_line(path, line)
            if head is not None:
                out.add(head.aten)
    elif path.endswith(".h") and path.startswith(co.NATIVE):
        for stub in tree.stubs.values():
            if stub.header == path and stub.line in lines:
                out.add(tree.stub_op(stub.name) or "")
    out.discard("")
    return out


def _git(root: Path, *args: str, error: str | None = None, hint: str | None = None) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise PorterError("--changed-since needs git, which is not on PATH") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [""])[0]
        if "not a git repository" in detail:
            raise PorterError(f"{root} is not in a git repository", hint="--changed-since compares git revisions")
        raise PorterError(error or f"git {' '.join(args[:2])} failed: {detail}", hint=hint)
    return proc.stdout
