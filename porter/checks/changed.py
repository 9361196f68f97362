"""What changed since a git ref: changed lines per file, and the ops they touch, with why.

`porter check --changed-since REF` keeps the findings that sit on a changed line or concern
an op the change touches, so a PR is judged on what it did, not on the tree's old debts.
Ops are found from structure only: the yaml entry, functor, kernel registration, host kernel
function, stub registration or declaration, expectation entry or OpInfo call a changed line
falls in; a line inside a kernel file's `#define` touches the ops whose registrations (or
macro-defined functors) its expansion changes. Added and changed lines are read in the working tree; removed lines in the file as
it was at REF (`OldCheckout`), so deleting a `REGISTER_UNARY_OP(sinc, ...)` line touches sinc
though nothing named sinc is left. Identifiers in arbitrary code name no op: a deleted
`std::to_string(x.to<double>())` touches whatever structure held it, never `std` or `to`.
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

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
# where a kernel file's #include <...> is found in the checkout: the -I list of the emulator
# and of upstream's Metal build (aten/src for ATen/..., the root for c10/metal/...)
INCLUDE_ROOTS = ("aten/src", "")


@dataclass
class Changes:
    ref: str
    lines: dict[str, set[int]] = field(default_factory=dict)   # path -> added/changed lines (new side)
    deletions: dict[str, set[int]] = field(default_factory=dict)   # path -> lines that lost lines after them
    removed: dict[str, set[int]] = field(default_factory=dict)  # path at REF -> its removed/replaced lines
    added_files: set[str] = field(default_factory=set)          # not at REF (new or untracked)
    deleted_files: set[str] = field(default_factory=set)        # at REF, gone now

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
    changes = parse_diff(diff, ref, lambda rel: _git(root, "show", f"{ref}:./{rel}"))
    untracked = _git(root, "ls-files", "--others", "--exclude-standard")
    for rel in filter(None, untracked.splitlines()):
        text = (root / rel).read_text(encoding="utf-8", errors="replace") if (root / rel).is_file() else ""
        count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        changes.lines[rel] = set(range(1, count + 1))
        changes.added_files.add(rel)
    return changes


def _slide(old: list[str], start: int, count: int) -> int:
    """How far a pure deletion of old lines [start, start + count) moves to begin a top-level
    construct. A block whose edges repeat can be cut at several places for the same result;
    git may cut the tail of the function above with it (deleting softplus_out_mps after a
    threshold_out_mps that ends as it does touches threshold's last lines), which names the
    wrong op. 0 where no place begins one."""
    def ok(k: int) -> bool:
        i = start - 1 + k
        return 0 <= i < len(old) and old[i][:1] not in ("", " ", "\t", "}") and old[i].strip() != ""
    down = 0
    while start - 1 + count + down < len(old) and old[start - 1 + down] == old[start - 1 + count + down]:
        down += 1
    up = 0
    while start - 2 - up >= 0 and old[start - 2 - up] == old[start - 2 + count - up]:
        up += 1
    if ok(0):
        return 0
    for k in sorted(range(-up, down + 1), key=abs):
        if ok(k):
            return k
    return 0


def parse_diff(diff: str, ref: str = "", old_text=None) -> Changes:
    """`old_text(path)`, where given, reads a file at the ref: a pure deletion is then moved to
    where it begins a top-level construct (`_slide`)."""
    changes = Changes(ref)
    old_lines: dict[str, list[str]] = {}
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
                if old_path is None:
                    changes.added_files.add(path)
            elif old_path is not None:
                changes.deleted_files.add(old_path)
        elif line.startswith("diff --git"):
            path = old_path = None
        elif line.startswith("@@"):
            m = HUNK_RE.match(line)
            if m is None:
                continue
            old_start, old_count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            shift = 0
            new_count = int(m.group(4) if m.group(4) is not None else 1)
            if old_text is not None and old_path is not None and old_count and not new_count:
                if old_path not in old_lines:
                    try:
                        old_lines[old_path] = old_text(old_path).split("\n")
                    except PorterError:
                        old_lines[old_path] = []
                shift = _slide(old_lines[old_path], old_start, old_count)
                old_start += shift
            if old_path is not None and old_count:
                changes.removed.setdefault(old_path, set()).update(range(old_start, old_start + old_count))
            if path is not None:
                start, count = int(m.group(3)), int(m.group(4) if m.group(4) is not None else 1)
                if count:
                    changes.lines[path].update(range(start, start + count))
                else:    # pure deletion after line `start`
                    changes.deletions[path].add(start + shift)
    return changes


def reads_ops(path: str) -> bool:
    """Whether `path` is one of the sources whose structure names ops: kernels, hosts, stubs,
    yaml, expectation lists and OpInfo definitions (a README's lines never name one)."""
    return (path.startswith((f"{co.NATIVE}/", f"{co.C10_METAL}/")) or path == co.COMMON_MPS
            or path == co.OPINFO_DB or path.startswith(co.OPINFO_DEFINITIONS))


def touched_ops(tree: Tree, changes: Changes) -> set[str]:
    """Aten ops (yaml base names) the change touches."""
    return set(explain(tree, changes))


def explain(tree: Tree, changes: Changes) -> dict[str, list[str]]:
    """op -> why it was picked ("path:line: functor sinc_functor", "... (removed)"), one entry
    per structure a changed line falls in; added/changed lines in the working tree, removed
    lines in the files as they were at the ref."""
    why: dict[str, list[str]] = {}

    def pick(current: Tree, at: str):
        def add(op: str | None, path: str, line: int, what: str) -> None:
            if op and op in current.op_names:
                reason = f"{path}:{line}{at}: {what}{', removed' if at else ''}"
                if reason not in why.setdefault(op, []):
                    why[op].append(reason)
        return add

    add_new = pick(tree, "")   # lines of the working tree
    for path, lines in changes.lines.items():
        touch = Touch(lines, changes.deletions.get(path, set()))
        _structural(tree, path, touch, add_new)
        _header(tree, path, touch, add_new)
    removed = {p: lines for p, lines in changes.removed.items() if lines and reads_ops(p)}
    old = None
    if removed:
        old = Tree(OldCheckout(tree.checkout.root, changes))
        add_old = pick(old, f" at {changes.ref}")      # lines of the file at the ref
        for path, lines in removed.items():
            _structural(old, path, Touch(lines, set()), add_old)
            _header(old, path, Touch(lines, set()), add_old)
    for path in sorted(p for p in set(changes.lines) | set(removed) if p.endswith(".metal") and reads_ops(p)):
        if old is None:
            old = Tree(OldCheckout(tree.checkout.root, changes))
        _macros(tree, old, path, changes, add_new)
    return {op: why[op] for op in sorted(why)}


def _touched_defines(metal, touch: Touch) -> list:
    """The file-local `#define`s of a kernel file a changed line falls in."""
    if metal is None:
        return []
    out = []
    for define in metal.defines.values():
        first = metal.text.count("\n", 0, define.start) + 1
        last = metal.text.count("\n", 0, max(define.start, define.end - 1)) + 1
        if touch.span(first, last):
            out.append(define)
    return out


def _macros(tree: Tree, old: Tree, path: str, changes: Changes, add) -> None:
    """A changed line inside a kernel file's `#define`: the registrations it expands to sit on
    the lines of the macro's users, which no line of the diff names (deleting the half line of
    REGISTER_FLOAT_BINARY_OP drops copysign's half kernel). The ops whose registrations differ
    between the ref and now are touched; where the macro registers nothing (it defines
    functors, say), every op its users name is."""
    new_metal, old_metal = tree.metals.get(path), old.metals.get(path)
    touched = {d.name: d for d in _touched_defines(new_metal, Touch(changes.lines.get(path, set()),
                                                                    changes.deletions.get(path, set())))}
    for d in _touched_defines(old_metal, Touch(changes.removed.get(path, set()), set())):
        touched.setdefault(d.name, d)
    if not touched:
        return
    base = posixpath.basename(path)

    def add_each(name: str, *where) -> None:
        for op in tree.ops_of(name):
            add(op, *where)

    def expansions(metal) -> dict[str, list]:
        found: dict[str, list] = {}
        for reg in (metal.registrations if metal is not None else []):
            found.setdefault(reg.kernel, []).append(reg[:4] + reg[5:])     # all but the line
        return {k: sorted(v) for k, v in found.items()}

    before, after = expansions(old_metal), expansions(new_metal)
    names = ", ".join(sorted(touched))
    line = min(d.line for d in touched.values())
    for kernel in sorted(set(before) | set(after)):
        if before.get(kernel) != after.get(kernel):
            add_each(kernel, path, line, f"registrations of {kernel} changed through macro {names}")
    # users of a macro that registers nothing: the first argument of each invocation names the
    # functor or kernel it defines (DEFINE_FOO(erfinv))
    for metal in (new_metal, old_metal):
        if metal is None:
            continue
        for name in touched:
            for m in re.finditer(rf"^[ \t]*{re.escape(name)}\(\s*(\w+)", metal.mask, re.M):
                if any(d.start <= m.start() < d.end for d in metal.defines.values()):
                    continue
                at = metal.text.count("\n", 0, m.start()) + 1
                if not any(r.line == at for r in metal.registrations):
                    add_each(m.group(1), path, line, f"{m.group(1)} defined through macro {names} of {base}")


DEFINITION_RE = re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)[^;{]*$|(\w+)\s*\([^;{]*$")
USING_RE = re.compile(r"^[ \t]*(?:template\s*<[^;{]*>\s*)?using\s+(\w+)\s*=", re.M)
DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)
INERT_LINE_RE = re.compile(r"^[ \t]*(?:#[ \t]*pragma[ \t]+once[ \t]*)?$")


def header_definitions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each top-level definition of a header: a struct,
    class, enum or function with a body (whatever namespace holds it), a `using` alias, a
    `#define`."""
    from porter.source.cpp_scan import code_mask, matching_close

    mask = code_mask(text)
    out: list[tuple[str, int, int]] = []
    at = 0
    while True:
        open_at = mask.find("{", at)
        if open_at < 0:
            break
        close = matching_close(mask, open_at)
        if close < 0:
            break
        head_start = max(mask.rfind(c, 0, open_at) for c in ";}{#") + 1
        if head_start > 0 and mask[head_start - 1] == "#":     # a preprocessor line ends the head
            newline = mask.find("\n", head_start, open_at)
            head_start = newline + 1 if newline >= 0 else open_at
        head = mask[head_start:open_at]
        m = DEFINITION_RE.search(" ".join(head.split()))
        name = m and (m.group(1) or m.group(2))
        if name and name != "namespace" and not re.search(r"\bnamespace\b", head):
            first = text.count("\n", 0, head_start + len(head) - len(head.lstrip())) + 1
            out.append((name, first, text.count("\n", 0, close) + 1))
            at = close + 1
        else:                   # a namespace (or an unnamed block): its definitions are inside
            at = open_at + 1
    for regex in (USING_RE, DEFINE_RE):
        for m in regex.finditer(mask):
            line = text.count("\n", 0, m.start()) + 1
            end = mask.find(";", m.end()) if regex is USING_RE else mask.find("\n", m.end())
            out.append((m.group(1), line, text.count("\n", 0, end if end >= 0 else len(text)) + 1))
    return out


def _header(tree: Tree, path: str, touch: Touch, add) -> None:
    """A changed header line: in each kernel file that includes the header, the ops whose
    functors use the definition it falls in, directly or through the headers' other definitions
    (a `SoftplusParams` struct: softplus; c10::metal::hypot: hypot). Where no functor of the file
    uses it, or the line is outside any definition (an #include, a macro's use), every op of
    the file: a header that no longer builds fails the whole file on a Mac, so some test must
    build it. Blank lines and `#pragma once` change nothing."""
    if not touch or not path.endswith(".h") or not reads_ops(path):
        return
    including = [(rel, metal) for rel, metal in tree.metals.items()
                 if path in included_headers(tree.checkout.root, rel, metal.text)]
    if not including:
        return
    try:
        text = tree.read(path)
    except PorterError:
        return
    lines = text.split("\n")
    definitions = header_definitions(text)
    names: dict[str, int] = {}
    loose: list[int] = []
    for line in touch:
        hit = [d for d in definitions if d[1] <= line <= d[2]]
        for name, first, _ in hit:
            names.setdefault(name, first)
        if not hit and 0 < line <= len(lines) and not INERT_LINE_RE.match(lines[line - 1]):
            loose.append(line)
    for rel, metal in including:
        base = posixpath.basename(rel)
        if loose:
            for kernel in metal.kernels():
                for op in tree.ops_of(kernel):
                    add(op, path, loose[0], f"header line included by {base}")
            continue
        # what the changed definitions reach: the definitions of every header this kernel file
        # includes that use one of them (c10::metal::erfc calls erf), transitively
        used = {name: name for name in names}
        others = []
        for header in included_headers(tree.checkout.root, rel, metal.text):
            header_text = text if header == path else tree.read(header)
            header_lines = header_text.split("\n")
            others += [(d, "\n".join(header_lines[first - 1:last])) for d, first, last in header_definitions(header_text)]
        grew = True
        while grew:
            grew = False
            for name, body in others:
                if name not in used:
                    via = next((n for n in used if re.search(rf"\b{re.escape(n)}\b", body)), None)
                    if via is not None:
                        used[name], grew = used[via], True
        bodies = {functor: metal.text[start:end] for functor, (start, end) in metal.functor_spans.items()}
        bodies.update(_macro_functors(metal, dict(others)))
        users = 0
        for name, origin in used.items():
            word = re.compile(rf"\b{re.escape(name)}\b")
            for functor, body in bodies.items():
                if word.search(body):
                    through = "" if name == origin else f" through {name}"
                    for op in tree.ops_of(functor):
                        add(op, path, names[origin],
                            f"{origin}, used by functor {functor} of {base}{through}")
                    users += 1
        if not users:
            # no functor uses what changed, yet the file compiles it: a header that no longer
            # builds fails every kernel of the file on a Mac, so its ops are tested
            for kernel in metal.kernels():
                for op in tree.ops_of(kernel):
                    add(op, path, min(names.values()),
                        f"{', '.join(sorted(names))} changed in a header {base} includes, used by none of its functors")


def _macro_functors(metal, definitions: dict[str, str]) -> dict[str, str]:
    """functor -> its text, for the functors a kernel file defines through a header's macro
    (`DEFINE_UNARY_FLOATING_FUNCTOR(erfinv);`): the invocation and the macro's body with its
    arguments in, so a changed c10::metal::erfinv (or the macro itself) reaches erfinv's."""
    lines = metal.text.split("\n")
    out: dict[str, str] = {}
    for functor, line in metal.functors.items():
        if functor in metal.functor_spans or not 0 < line <= len(lines):
            continue
        call = re.match(r"\s*(\w+)\s*\(([^)]*)\)", lines[line - 1])
        body = definitions.get(call.group(1)) if call else None
        if body is None:
            out[functor] = lines[line - 1]
            continue
        head = re.match(r"\s*#\s*define\s+\w+\(([^)]*)\)", body)
        if head:
            params = [p.strip() for p in head.group(1).split(",")]
            args = [a.strip() for a in call.group(2).split(",")]
            body = body[head.end():]
            for param, arg in zip(params, args):
                body = re.sub(rf"\b{re.escape(param)}\b", arg, body)
        out[functor] = lines[line - 1] + "\n" + body
    return out


class OldCheckout(co.Checkout):
    """The checkout as it was at the ref: the files the diff names, read from git; every other
    file is the same in both (the diff compares the working tree with the ref)."""

    def __init__(self, root: Path, changes: Changes):
        super().__init__(root)
        self.changes = changes

    def _changed(self, rel: str) -> bool:
        return rel in self.changes.removed or rel in self.changes.lines or rel in self.changes.deleted_files

    def exists(self, rel: str) -> bool:
        if rel in self.changes.added_files:
            return False
        return rel in self.changes.deleted_files or super().exists(rel)

    def read(self, rel: str) -> str:
        if rel in self.changes.added_files:
            raise PorterError(f"{rel}: not in {self.changes.ref}")
        if not self._changed(rel):
            return super().read(rel)
        text = self._texts.get(rel)
        if text is None:
            text = _git(self.root, "show", f"{self.changes.ref}:{rel}",
                        error=f"cannot read {rel} at {self.changes.ref}")
            self._texts[rel] = text
        return text

    def glob(self, rel_dir: str, pattern: str) -> list[str]:
        import fnmatch

        found = set(super().glob(rel_dir, pattern)) - self.changes.added_files
        last = pattern.rsplit("/", 1)[-1]
        for rel in self.changes.deleted_files:
            rest = rel[len(rel_dir) + 1:] if rel.startswith(rel_dir + "/") else None
            if rest and fnmatch.fnmatchcase(posixpath.basename(rest), last) and ("/" in pattern or "/" not in rest):
                found.add(rel)
        return sorted(found)


def _including_kernel_ops(tree: Tree, header: str) -> set[tuple[str, str]]:
    """(op, kernel file) for every kernel file that #includes `header`, directly or through
    another header: a changed c10/metal or kernels/*.h line can break any functor compiled with
    it, though the line names no op (c10::metal::hypot's body names no caller)."""
    out: set[tuple[str, str]] = set()
    for rel, metal in tree.metals.items():
        if header in included_headers(tree.checkout.root, rel, metal.text):
            out |= {(op, rel) for k in metal.kernels() for op in tree.ops_of(k)}
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


def _structural(tree: Tree, path: str, lines: Touch, add) -> None:
    """Call add(op, path, line, what) for each structure of `path` that a line of `lines` falls in."""
    if not lines:
        return
    if path == co.NATIVE_YAML:
        for e in tree.entries:
            if lines.span(e.start + 1, e.end):
                add(op_of_entry(e), path, e.start + 1, f"yaml entry {e.name}{'.' + e.overload if e.overload else ''}")
    elif path in tree.metals:
        metal = tree.metals[path]
        text = metal.text
        for name, (start, end) in metal.functor_spans.items():
            first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1
            if lines.span(first, last):
                for op in tree.ops_of(name):
                    add(op, path, first, f"functor {name}")
        for name, line in metal.functors.items():
            # a functor a macro defines (DEFINE_UNARY_FLOATING_FUNCTOR(erfinv);): one line
            if name not in metal.functor_spans and line in lines:
                for op in tree.ops_of(name):
                    add(op, path, line, f"functor {name} (macro)")
        for reg in metal.registrations:
            if reg.line in lines:
                for op in tree.ops_of(reg.kernel):
                    add(op, path, reg.line, f"kernel registration {reg.kernel}")
    elif path in tree.hosts:
        host = tree.hosts[path]
        stubs = {r.function.split("::")[-1].lstrip("&"): r.stub for r in host.dispatch_registrations}
        for fn in host.kernel_functions.values():
            last = host.text.count("\n", 0, fn.end) + 1
            if lines.span(fn.line, last):
                for k in fn.kernels:
                    for op in tree.ops_of(k, guess=False):
                        add(op, path, fn.line, f"host function {fn.name} (kernel {k})")
                if fn.name in stubs:
                    add(tree.stub_op(stubs[fn.name]), path, fn.line, f"host function {fn.name} ({stubs[fn.name]})")
        for stub, rel, line, _, _ in tree.registrations:
            if rel == path and line in lines:
                add(tree.stub_op(stub), path, line, f"stub registration {stub}")
        for kernel, line, _ in tree.kernel_uses.get(path, []):
            if line in lines:
                for op in tree.ops_of(kernel, guess=False):
                    add(op, path, line, f"host call of kernel {kernel}")
        _mps_implementations(tree, path, host.text, lines, add)
    elif path == co.COMMON_MPS:
        for e in tree.expectation_entries:
            if lines.span(e.line, e.end_line):
                heads = tree.opinfos.by_key.get(e.key, [])
                for op in {h.aten for h in heads} or {tree.to_op(e.key) or ""}:
                    add(op, path, e.line, f"expectation entry {e.key!r}")
    elif path.endswith(".py") and (path == co.OPINFO_DB or path.startswith(co.OPINFO_DEFINITIONS)):
        for line in lines:
            head = tree.opinfos.at_line(path, line)
            if head is not None:
                add(head.aten, path, head.line, f"OpInfo {head.key!r}")
    elif path.endswith(".h") and path.startswith(co.NATIVE):
        for stub in tree.stubs.values():
            if stub.header == path and stub.line in lines:
                add(tree.stub_op(stub.name), path, stub.line, f"stub declaration {stub.name}")


def _mps_implementations(tree: Tree, path: str, text: str, lines: Touch, add) -> None:
    """An MPS implementation (MPSGraph or Metal) a changed line falls in: the op whose yaml row
    dispatches MPS to it (`MPS: softplus_out_mps`), or a `REGISTER_MPS_UNARY_STUB(op, ...)`."""
    from porter.source.mpsgraph_scan import STUB, source_of

    definitions = [d for d in source_of(text).definitions
                   if lines.span(d.line, text.count("\n", 0, d.end) + 1)]
    if not definitions:
        return
    rows: dict[str, str] = {}
    for entry in tree.mps_entries:
        for row in entry.mps_rows():
            rows.setdefault(row.kernel, op_of_entry(entry))
    for d in definitions:
        op = d.name if d.shape == STUB else rows.get(d.name)
        if op:
            add(op, path, d.line, f"MPS implementation {d.name}" if d.shape != STUB
                else f"REGISTER_MPS_UNARY_STUB({d.name}, ...)")


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
