"""Helpers for running porter in tests: in-process CLI calls and tree snapshots."""

from __future__ import annotations

import contextlib
import hashlib
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

from porter.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


# The port commands end with the op's test (issue 21); a test about something else ports
# without it, as `--no-test` does (pass `--test` for the verdict).
PORT_COMMANDS = ("new-op", "migrate-from-mpsgraph")


def porter(*args: str, root: Path | None = None) -> Result:
    argv = list(args) + (["--root", str(root)] if root is not None else [])
    if argv and argv[0] in PORT_COMMANDS and not {"--dry-run", "--test", "--no-test"} & set(argv):
        argv.append("--no-test")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return Result(code, out.getvalue(), err.getvalue())


def by_dtype(report: dict) -> dict[str, dict]:
    """`porter test --json`'s report as one entry per dtype across the full verdict's row groups
    (upstream's samples, the reference inputs, the shapes): a failing group's entry wins, so a
    passing shapes row cannot hide the samples' failure."""
    by: dict[str, dict] = {}
    for row in report["ops"]:
        for case in row["dtypes"]:
            if by.get(case["dtype"], {"outcome": "pass"})["outcome"] == "pass":
                by[case["dtype"]] = case
    return by


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under root (relative path -> digest)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.parts}


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def file_diff(result_out: str, path: str) -> str:
    """The part of a dry-run diff that concerns one file."""
    chunks, current = {}, None
    for line in result_out.splitlines(keepends=True):
        if line.startswith("--- "):
            current = None
        if line.startswith("+++ b/"):
            current = line[len("+++ b/"):].strip()
            chunks[current] = ""
            continue
        if line.startswith(("dry run:", "note:")):
            current = None
        if current:
            chunks[current] += line
    return chunks.get(path, "")


def added_lines(diff: str) -> str:
    """The `+` lines of a diff, as one text."""
    return "".join(line for line in diff.splitlines(keepends=True) if line.startswith("+"))


def git_init(root: Path) -> None:
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(cmd, cwd=root, check=True)


def without_cpu_kernel(root: Path, stub: str) -> None:
    """The tree with `stub`'s CPU kernel unregistered (its `REGISTER_DISPATCH` line gone from
    cpu/*.cpp): an op whose CPU lambda porter cannot find, so that a port asks for --body."""
    import re
    for path in sorted((Path(root) / "aten/src/ATen/native/cpu").glob("*.cpp")):
        text = path.read_text()
        new = re.sub(rf"^REGISTER_DISPATCH\({re.escape(stub)},[^\n]*\n", "", text, flags=re.M)
        if new != text:
            path.write_text(new)
            return
    raise AssertionError(f"no CPU kernel registered for {stub}")


def fallback_example_is(root: Path, op: str) -> None:
    """test_mps.py's TestFallbackWarning made to run `op` as its op without an MPS kernel (the
    fixture's is cummax, which no test ports): a port of `op` says so (porter.port.plan), and
    `porter check` finds it once `op` has a kernel (PORTER032)."""
    path = root / "test" / "test_mps.py"
    text = path.read_text()
    old = '(torch.cummax, torch.tensor([-1.0, 0.0, 2.0], device="mps"), 0,\n                "aten::cummax")'
    assert text.count(old) == 1
    path.write_text(text.replace(old, f'(torch.{op}, torch.tensor([-1.0, 0.0, 2.0], device="mps"),'
                                      f' torch.tensor([0.5], device="mps"), "aten::{op}.out")'))
