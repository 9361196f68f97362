"""The host `.mm` files a branch changes, committed or not, and what each change added and removed.

A Mac builds every `.mm` file; porter parses the `*Kernel.mm` files and the op's own host in
full (porter.emulate.host_compile), and an MPSGraph file (BinaryOps.mm, UnaryOps.mm) not at
all, as it uses far more of Apple's frameworks than porter declares. So a change to one of
those, a port's deletion of the op's MPSGraph code among them, was never read: a missing `;`,
or a call of a helper the migration deleted, left every dtype green (review 21's H12, H12c,
H13). What the work tree changes against the branch's base (the merge base `porter pr` and
`porter test` take, porter.source.git_base; HEAD where the repository has none of the usual
refs) is what porter can hold to account: the code the base had is taken to build (a Mac built
it), the change is read, committed or not (review 22's BH1: a committed change was not). The
base's text is parsed too, and an error the work tree's parse has that the base's has not,
wherever it stands, is the change's (a signature changed on one line breaks its callers on
lines the base had: review 22's BH5).
"""

from __future__ import annotations

import re
import subprocess
from functools import partial
from pathlib import Path
from typing import NamedTuple

from porter.checks.changed import parse_diff

# every Objective-C++ file of ATen (native/mps/operations, and ATen/mps's MPSFallback.mm, which
# a port edits too); git's pathspec `*` crosses folders
ATEN = "aten/src/ATen"

# the C++ files the MPS build compiles besides the `.mm` files: upstream's aten/src/ATen/
# CMakeLists.txt globs `native/mps/*.cpp` (recursively) and `mps/*.cpp` under USE_MPS (review
# 25's H31, H37: a new `PorterNew.cpp` there that does not compile was green)
MPS_SOURCES = (f"{ATEN}/*.mm", f"{ATEN}/native/mps/*.cpp", f"{ATEN}/mps/*.cpp")

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


class Change(NamedTuple):
    lines: set[int]             # the lines the work tree adds or changes
    removed: set[str]           # the identifiers of the lines it removes
    head: str | None = None     # the base's text of the file (None: untracked)
    touched: frozenset = frozenset()     # every line a hunk touches, a pure deletion's place too


def _git(root: Path, *args: str) -> str | None:
    """git's output in `root`, None where it fails."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def changed_hosts(root: Path, base: str = "HEAD") -> dict[Path, Change]:
    """Path -> its Change for each `.mm` file of ATen, and each `.cpp` file of the MPS build
    (MPS_SOURCES), that the work tree changes against the commit `base` (the branch's commits
    and what is not committed) or that is untracked;
    empty where `root` is no git checkout with a commit."""
    git = partial(_git, root)
    diff = git("-c", "core.quotepath=off", "diff", "--no-color", "--no-ext-diff", "-U0", "--relative",
               base, "--", *MPS_SOURCES)
    if diff is None:
        return {}
    found: dict[Path, Change] = {}
    changes = parse_diff(diff)
    removed = _removed_identifiers(diff)
    for rel, lines in changes.lines.items():
        path = Path(root) / rel
        if path.is_file():
            head = git("show", f"{base}:./{rel}")
            found[path] = Change(_new_lines(path, lines, head), removed.get(rel, set()), head,
                                 frozenset(lines | changes.deletions.get(rel, set())))
    # every untracked file the build's globs take, those git ignores too: CMake does not read
    # .gitignore or .git/info/exclude (review 26's CP8)
    for rel in filter(None, (git("ls-files", "--others", "--", *MPS_SOURCES) or "").splitlines()):
        path = Path(root) / rel
        if path.is_file():
            count = path.read_text(encoding="utf-8", errors="replace").count("\n") + 1
            every = set(range(1, count + 1))
            found[path] = Change(every, set(), None, frozenset(every))
    return found


class HeaderChange(NamedTuple):
    head: str | None            # the base's text (None: the base has no such file)
    removed: set[str]           # the identifiers of the lines the change removes


def changed_headers(root: Path, base: str = "HEAD") -> dict[str, HeaderChange]:
    """Relative path -> its HeaderChange for each header of ATen that the work tree changes
    against `base`, committed or not, or adds untracked."""
    git = partial(_git, root)
    diff = git("-c", "core.quotepath=off", "diff", "--no-color", "--no-ext-diff", "--no-renames",
               "-U0", "--relative", base, "--", f"{ATEN}/*.h")
    if diff is None:
        return {}
    removed = _removed_identifiers(diff)
    found = {rel: HeaderChange(git("show", f"{base}:./{rel}"), removed.get(rel, set()))
             for rel in re.findall(r"^diff --git a/(\S+) b/", diff, re.M)}
    for rel in filter(None, (git("ls-files", "--others", "--exclude-standard", "--",
                                 f"{ATEN}/*.h") or "").splitlines()):
        found[rel] = HeaderChange(None, set())
    return found


def header_readers(root: Path, headers: set[str], wheel: str | None = None) -> dict[Path, set[str]]:
    """Each `.mm` file of ATen (and `.cpp` file of the MPS build) -> those of `headers`
    (relative paths) it reads (porter.emulate.include_graph: through the checkout's headers,
    and the installed torch's MPS headers, `wheel` its include directory, where the checkout
    lacks them)."""
    from porter.emulate.include_graph import IncludeGraph
    root = Path(root)
    graph = IncludeGraph(root, wheel)
    out: dict[Path, set[str]] = {}
    for source in sorted(p for pattern in ("*.mm", "*.cpp") for p in (root / ATEN).rglob(pattern)
                         if pattern == "*.mm" or _in_mps_build(root, p)):
        read = {p.relative_to(root).as_posix() for p in graph.reached(source)} & headers
        if read:
            out[source] = read
    return out


def _in_mps_build(root: Path, path: Path) -> bool:
    rel = path.relative_to(root).as_posix()
    return rel.startswith((f"{ATEN}/native/mps/", f"{ATEN}/mps/"))


def _new_lines(path: Path, lines: set[int], head: str | None) -> set[int]:
    """Of the lines a diff says the work tree adds, those whose text HEAD's file has nowhere: an
    insertion before a line that repeats (`TORCH_IMPL_FUNC(` ... ) can be shown by git as adding
    the old line, whose error HEAD had too."""
    if head is None:
        return lines
    had = {line.strip() for line in head.split("\n")}
    text = path.read_text(encoding="utf-8", errors="replace").split("\n")
    return {n for n in lines if n > len(text) or text[n - 1].strip() not in had}


def _removed_identifiers(diff: str) -> dict[str, set[str]]:
    """Path (as the work tree names it) -> the identifiers of the lines the diff removes."""
    found: dict[str, set[str]] = {}
    old = new = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            old = line[4:].strip()
        elif line.startswith("+++ "):
            new = line[4:].strip()
            new = new[2:] if new.startswith("b/") else None
        elif line.startswith("-") and new is not None and old is not None:
            found.setdefault(new, set()).update(_IDENTIFIER.findall(line[1:]))
    return found


def introduced(found: list, rel: str, change: Change, head_found: list | None = None,
               text: str | None = None, headers: dict[str, tuple[str, str]] | None = None
               ) -> tuple[list, list]:
    """Of host_compile's errors of a changed file: (those a Mac's build stops at: a syntax error,
    or a name the change removed still used), (other errors the change makes, which may be
    porter's want of a header a Mac's build generates, and a parse stopped before a changed
    line: not proven). With `head_found`, the parse of HEAD's text (and `text`, the work
    tree's): an error HEAD's parse has too, on a line of the same text, is porter's want of
    Apple's frameworks (a Mac built HEAD); any other is the change's, wherever it stands.
    `headers`: the checkout headers the branch changes that the parse read, each (the work
    tree's text, the base's), which the base's parse read as the base has them: an error in
    one, or in any other checkout file, is judged the same way (review 24's C1: a syntax
    error in a header only an MPSGraph `.mm` reads). Without `head_found` (an untracked file)
    the errors on the lines the change adds are."""
    if head_found is None or change.head is None or text is None:
        return _on_changed_lines(found, rel, change.lines, change.removed)
    headers = headers or {}
    lines = {rel: (text.split("\n"), change.head.split("\n")),
             **{h: (now.split("\n"), then.split("\n")) for h, (now, then) in headers.items()}}

    def identity(error: list, side: int) -> tuple:
        where = error[0]
        return (where, *_identity(error, lines[where][side] if where in lines else []))

    had = {identity(e, 1) for e in head_found}
    stops, unproven = [], []
    for error in found:
        where, line, why, kind = error
        if kind == "unmodelled" and identity(error, 0) not in had:
            # code that could set a stub's MPS function as porter does not model
            # (porter.emulate.host_registrations), which the base had not
            unproven.append(error)
        if kind not in ("syntax", "error", "stopped"):
            continue
        new = identity(error, 0) not in had
        if where != rel:
            # a header the branch changed: what the base's parse had not is the change's (the
            # base built on a Mac). Another checkout file the change made the parse read (an
            # include added): its syntax errors and stops alone, as porter's parse of a header
            # errs on names a Mac's build generates
            if new and (where in headers or kind != "error"):
                (stops if kind != "stopped" and _stops_the_build(kind, why, change.removed)
                 else unproven).append(error)
            continue
        if kind == "stopped":
            # nothing after it was read: the change is unread where it lies past the stop
            if new or any(n >= line for n in change.touched):
                unproven.append(error)
            continue
        if not new:
            continue
        if _stops_the_build(kind, why, change.removed):
            stops.append(error)
        else:
            unproven.append(error)
    return stops, unproven


def _stops_the_build(kind: str, why: str, removed: set[str]) -> bool:
    """Whether an error the change makes stops a Mac's build: a syntax error, or a name the
    change removed that the file still uses."""
    named = set(re.findall(r"'([A-Za-z_]\w*)'", why))
    return kind == "syntax" or bool(named & removed) and "undeclared" in why


def _identity(error: list, lines: list[str]) -> tuple:
    """An error as its kind, its words and its line's text: the same in HEAD's parse and the
    work tree's wherever the change moved the line."""
    _, line, why, kind = error
    return kind, why, lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _on_changed_lines(found: list, rel: str, lines: set[int], removed: set[str]) -> tuple[list, list]:
    """`introduced` where HEAD's parse is not there to compare: the errors on the lines the
    change adds, a syntax error anywhere, a removed name still used."""
    stops, unproven = [], []
    # what porter's parse already says of lines HEAD had: the same words on a changed line are
    # the same want of a framework or a generated header, repeated (a port's copy of the
    # checkout's scalar-free exec_ternary_kernel repeats the original's)
    known = {e[2] for e in found if e[0] == rel and e[3] == "error" and e[1] not in lines}
    for error in found:
        where, line, why, kind = error
        if kind == "unmodelled" and (where != rel or line in lines):
            # a new file's: in a header it includes too (review 28's R18, R21: a header's line
            # was compared with the file's changed lines)
            unproven.append(error)
        if where != rel or kind not in ("syntax", "error", "stopped"):
            continue
        if kind == "stopped":
            if any(n >= line for n in lines):
                unproven.append(error)
            continue
        # a syntax error anywhere: clang may place a missing `;` on the line after the change
        if _stops_the_build(kind, why, removed):
            stops.append(error)
        elif line in lines and why not in known:
            unproven.append(error)
    return stops, unproven
