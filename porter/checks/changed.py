"""What changed since a git ref: changed lines per file, the names they mention, the ops they touch.

`porter check --changed-since REF` keeps the findings that sit on a changed line or concern
an op the change touches, so a PR is judged on what it did, not on the tree's old debts.
Ops are found two ways: the structure around each changed line (the yaml entry, functor,
host kernel function, stub declaration, expectation entry or OpInfo call it falls in) and
the names written on added or removed lines (a deleted `REGISTER_UNARY_OP(sinc, ...)` line
touches sinc, though nothing named sinc remains on a changed line).
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from porter.source import checkout as co
from porter.checks.tree import Tree, op_of_entry
from porter.errors import PorterError

HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
NAME_RE = re.compile(r"(?<![\w:.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
# where a kernel file's #include <...> is found in the checkout: the -I list of the emulator
# and of upstream's Metal build (aten/src for ATen/..., the root for c10/metal/...)
INCLUDE_ROOTS = ("aten/src", "")
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
        if names_op(rel):
            changes.names |= names_in(text)
    return changes


def parse_diff(diff: str, ref: str = "") -> Changes:
    changes = Changes(ref)
    path = old_path = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            source = line[4:].strip()
            old_path = source[2:] if source.startswith("a/") else None
        elif line.startswith("+++ "):
            target = line[4:].strip()
            path = target[2:] if target.startswith("b/") else None
            if path is not None:
                changes.lines.setdefault(path, set())
                changes.deletions.setdefault(path, set())
        elif line.startswith("diff --git"):
            path = old_path = None
        elif line.startswith("@@"):
            m = HUNK_RE.match(line)
            if m and path is not None:
                start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
                if count:
                    changes.lines[path].update(range(start, start + count))
                else:    # pure deletion after line `start`
                    changes.deletions[path].add(start)
        elif line[:1] in "+-" and names_op(path or old_path or ""):
            changes.names |= names_in(line[1:])
    return changes


def names_op(path: str) -> bool:
    """Whether a word on a changed line of `path` can name an op: the kernel, host, stub, yaml,
    expectation and OpInfo sources porter reads. English elsewhere (a README's "to", "index",
    "real") would send ops no kernel change touched to the workflow's test jobs."""
    return (path.startswith((f"{co.NATIVE}/", f"{co.C10_METAL}/")) or path == co.COMMON_MPS
            or path == co.OPINFO_DB or path.startswith(co.OPINFO_DEFINITIONS))


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
        touch = Touch(lines, changes.deletions.get(path, set()))
        found |= _structural(tree, path, touch)
        if touch and path.endswith(".h"):
            found |= _including_kernel_ops(tree, path)
    return {op for op in found if op in tree.op_names}


def _including_kernel_ops(tree: Tree, header: str) -> set[str]:
    """The ops of every kernel file that #includes `header`, directly or through another header:
    a changed c10/metal or kernels/*.h line can break any functor compiled with it, though the
    line names no op (c10::metal::hypot's body names no caller)."""
    out: set[str] = set()
    for rel, metal in tree.metals.items():
        if header in included_headers(tree.checkout.root, rel, metal.text):
            out |= {tree.kernel_ops.get(k) or tree.to_op(k) or k for k in metal.kernels()}
    return out


def included_headers(root: Path, rel: str, text: str) -> set[str]:
    """Checkout-relative paths of the headers `rel` includes, transitively (those the checkout
    holds; <metal_stdlib> and headers only a torch wheel holds are none of the PR's)."""
    seen: set[str] = set()
    pending = [(rel, text)]
    while pending:
        current, body = pending.pop()
        for name in INCLUDE_RE.findall(body):
            for base in (*INCLUDE_ROOTS, posixpath.dirname(current)):
                found = posixpath.normpath(posixpath.join(base, name)) if base else name
                if found not in seen and (root / found).is_file():
                    seen.add(found)
                    pending.append((found, (root / found).read_text(encoding="utf-8", errors="replace")))
                    break
                if found in seen:
                    break
    return seen


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
