"""Hostile input, fuzzed with hypothesis: odd op names and damaged checkouts, for every editing
command. Every case ends in success or a one-line error with exit 2: no traceback, no
"internal error" (cli.py's last-resort handler; counted as a failure here), and no file
changed by a failed run. A successful run must be idempotent (the next run: nothing to do).

CI: a fixed seed and a few hundred examples; PORTER_SOAK=1: random, thousands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from porter.source.checkout import COMMON_MPS, NATIVE_YAML
from porter.testing.trees import fixture_root
from tests.reliability import harness
from tests.reliability.harness import one_line_error, porter, read_tree, write_tree

OPS = ["heaviside", "special_log_ndtr", "special_ndtri", "special.ndtri", "sign", "signbit",
       "frac", "sgn", "asinh", "atanh", "acosh", "logit", "pow", "atan2", "hypot", "exp",
       "rsqrt", "round", "bmm", "linalg_svd", "special_erfcx", "xlogy", "bitwise_not"]
METAL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
BMETAL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"


def fuzz_settings(ci: int, soak: int):
    return settings(max_examples=soak if harness.SOAK else ci, deadline=None,
                    derandomize=not harness.SOAK, database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def tree(work_dir):
    """One fixture checkout (outside git: damaged files would only be refused as dirty),
    put back after every example."""
    root = work_dir / "fuzz" / "mini-pytorch"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(fixture_root(), root)
    return root


@pytest.fixture(scope="module")
def outcomes():
    """Counts of how the fuzzed runs ended, written to the reliability report."""
    counts = Counter()
    yield counts
    harness.report("fuzz", dict(counts))
    print(f"\nfuzz outcomes: {dict(counts)}")


@pytest.fixture(scope="module")
def commands():
    return harness.editing_commands()


# commands that take --allow-dirty for an optional edit (--prune-xfails, --prune), and report
REPORTING = {"test", "audit-xfails"}


def check(root: Path, argv: list[str], before: dict, outcomes: Counter,
          full_verdict: bool = False) -> list[str]:
    """Run porter; the problems with what it did. `porter test` runs upstream's samples alone
    unless `full_verdict`: what hostile input reaches (the checkout's reading, the plan, the
    build, the dispatch) is the same in every row, and the full verdict's reference inputs and
    shapes cost about six times as much a run (tests/test_one_verdict.py holds that verdict)."""
    if argv[0] in harness.OPS_FOR:      # the port, not its test: a red test exits 1 written
        argv = [argv[0], "--no-test", *argv[1:]]
    if argv[0] == "test" and not full_verdict:
        argv = [argv[0], "--samples-only", *argv[1:]]
    result = porter(*argv)
    outcomes["runs"] += 1
    outcomes["success" if result.code == 0 else f"exit {result.code}"] += 1
    problems = []
    if "Traceback" in result.err or "internal error" in result.err:
        problems.append(f"crash: {result.err.strip()[-600:]}")
    elif result.code == 1 and argv[0] in REPORTING:
        # a red verdict (an unported op tests nothing: exit 1 naming the port command), reported
        # on stdout: not an error, and nothing written
        if read_tree(root) != before:
            problems.append("a red run without --prune-xfails changed the tree")
        if not result.out.strip():
            problems.append("exit 1 with no report")
    elif result.code == 0 and argv[0] in REPORTING:
        # test and audit-xfails only write with --prune-xfails / --prune: a run (on Linux,
        # --device auto is the emulator) leaves the tree as it was, and a rerun agrees
        again = porter(*argv)
        if read_tree(root) != before:
            problems.append("a run without --prune-xfails changed the tree")
        if again.code != 0:
            problems.append(f"a rerun said ({again.code}) {(again.err or again.out).strip()[:400]}")
    elif result.code == 0:
        again = porter(*argv)
        if again.code != 0 or "nothing to do" not in again.out:
            problems.append(f"not idempotent: the second run said ({again.code}) "
                            f"{(again.err or again.out).strip()[:400]}")
    elif not one_line_error(result, codes=(1, 2)):
        problems.append(f"exit {result.code}, not a one-line error: {result.err.strip()[:600]!r}")
    elif read_tree(root) != before:
        now = read_tree(root)
        problems.append("a failed run changed " + ", ".join(
            sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))))
    return problems


# --- op names ------------------------------------------------------------------------------

def near_miss(name: str) -> st.SearchStrategy[str]:
    edits = st.sampled_from(["insert", "delete", "replace", "swapcase", "prefix", "suffix", "dots"])
    return st.tuples(edits, st.integers(0, len(name)), st.characters()).map(
        lambda t: _edit(name, *t))


def _edit(name: str, how: str, i: int, ch: str) -> str:
    if how == "insert":
        return name[:i] + ch + name[i:]
    if how == "delete":
        return name[:i] + name[i + 1:]
    if how == "replace":
        return name[:i] + ch + name[i + 1:]
    if how == "swapcase":
        return name.swapcase()
    if how == "prefix":
        return ["special.", "torch.", "aten::", "linalg.", "fft.", " ", "_"][i % 7] + name
    if how == "suffix":
        return name + [".out", "_", ".Tensor", "_out", " ", "\n", ".", "_mps", ".default"][i % 9]
    return name.replace("_", ".")


PATHS = ["", " ", ".", "..", "../x", "a/b", "/etc/passwd", "~", "-", "--help", "-x", "heaviside/",
         "..heaviside", "special.", "special..log_ndtr", "special.log_ndtr.out", "x" * 5000,
         "heaviside" * 300, "ｈeaviside", "héaviside", "heaviside\u200b", "heaviside\r",
         "heavi side", "heaviside;rm -rf /", "$(touch pwned)", "%s%n", "\\x00", "nul\x7f",
         "𝔥eaviside", "Heaviside", "HEAVISIDE", "sign_", "sign.out", "pow.Scalar", "round.decimals"]

names = st.one_of(st.text(max_size=40), st.sampled_from(PATHS),
                  st.sampled_from(OPS).flatmap(near_miss), st.sampled_from(OPS))


@fuzz_settings(ci=300, soak=3000)
@given(data=st.data())
@pytest.mark.slow
def test_op_names(tree, commands, outcomes, data):
    command = data.draw(st.sampled_from(commands), label="command")
    name = data.draw(names, label="op")
    before = read_tree(tree)
    try:
        problems = check(tree, [command, "--root", str(tree), "--", name], before, outcomes)
    finally:
        write_tree(tree, before)
    assert not problems, f"porter {command} -- {name!r}: {problems}"


# --- damaged checkouts -----------------------------------------------------------------------

FILES = sorted(str(p.relative_to(fixture_root())) for p in fixture_root().rglob("*")
               if p.is_file() and p.name != "README.md")
NOISE = st.sampled_from(["{", "}", "(", ")", "[", "]", '"', "'", '"""', "/*", "*/", "//", "#",
                         "\\", "\n", "\t", ":", ",", "-", "- func:", "  dispatch:", "    MPS: x",
                         "struct heaviside_functor {", "REGISTER_DISPATCH(heaviside_stub, &x);",
                         "TORCH_IMPL_FUNC(sign_out_mps)", "R\"(", "#define", "@", "\ufeff",
                         "é", "\x00", "UNIMPLEMENTED_XFAILLIST = {", "'heaviside': None,"])


@st.composite
def mutation(draw, files=FILES):
    rel = draw(st.sampled_from(files), label="file")
    kind = draw(st.sampled_from(["truncate", "delete-line", "duplicate-line", "insert", "garbage",
                                 "remove-file", "empty", "dup-dispatch-key", "mps-key-twice",
                                 "reuse-functor", "unparsable-python", "unbalanced-brace",
                                 "crlf", "bom"]), label="mutation")
    where = draw(st.floats(0, 1), label="where")
    noise = draw(st.lists(NOISE, min_size=1, max_size=4).map("".join), label="noise")
    junk = draw(st.binary(min_size=1, max_size=16), label="bytes")
    return rel, kind, where, noise, junk


def apply_mutation(root: Path, rel: str, kind: str, where: float, noise: str, junk: bytes) -> str:
    """Damage one file in the given way; returns the path actually damaged."""
    if kind == "dup-dispatch-key":
        rel = NATIVE_YAML
    elif kind == "mps-key-twice":
        rel = NATIVE_YAML
    elif kind == "reuse-functor":
        rel = BMETAL if where < 0.5 else METAL
    elif kind == "unparsable-python":
        rel = COMMON_MPS if where < 0.7 else rel if rel.endswith(".py") else COMMON_MPS
    path = root / rel
    if not path.is_file():          # removed by an earlier mutation
        return rel
    data = path.read_bytes()
    lines = data.splitlines(keepends=True) or [b""]
    at = int(where * len(lines)) % len(lines)
    pos = int(where * len(data))
    if kind == "truncate":
        data = data[:pos]
    elif kind == "delete-line":
        del lines[at]
        data = b"".join(lines)
    elif kind == "duplicate-line":
        lines.insert(at, lines[at])
        data = b"".join(lines)
    elif kind == "insert":
        data = data[:pos] + noise.encode() + data[pos:]
    elif kind == "garbage":
        data = data[:pos] + junk + b"\xff\xfe" + data[pos:]
    elif kind == "remove-file":
        path.unlink()
        return rel
    elif kind == "empty":
        data = b""
    elif kind == "dup-dispatch-key":
        rows = [i for i, line in enumerate(lines) if line.startswith(b"    ") and b": " in line
                and (b"CPU" in line or b"MPS" in line)]
        if rows:
            i = rows[int(where * len(rows)) % len(rows)]
            lines.insert(i + 1, lines[i])
        data = b"".join(lines)
    elif kind == "mps-key-twice":
        rows = [i for i, line in enumerate(lines) if b"CPU, CUDA" in line]
        if rows:
            i = rows[int(where * len(rows)) % len(rows)]
            lines[i] = lines[i].replace(b"CPU, CUDA", b"CPU, MPS, CUDA, MPS", 1)
        data = b"".join(lines)
    elif kind == "reuse-functor":
        text = data.decode("utf-8", "surrogateescape")
        functors = re.findall(r"struct (\w+)_functor", text)
        if functors:
            victim = functors[int(where * len(functors)) % len(functors)]
            reused = ["heaviside", "special_log_ndtr", "special_ndtri", "sign", "acosh", "frac"][
                int(where * 6) % 6]
            text = text.replace(f"struct {victim}_functor", f"struct {reused}_functor", 1)
        data = text.encode("utf-8", "surrogateescape")
    elif kind == "unparsable-python":
        lines.insert(at, b"def broken(:\n")
        data = b"".join(lines)
    elif kind == "unbalanced-brace":
        i = data.find(b"}", pos)
        data = data[:i] + data[i + 1:] if i >= 0 else data + b"{\n"
    elif kind == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif kind == "bom":
        data = b"\xef\xbb\xbf" + data
    path.write_bytes(data)
    return rel


@fuzz_settings(ci=300, soak=5000)
@given(data=st.data())
@pytest.mark.slow(seconds=300)
def test_damaged_checkout(tree, commands, outcomes, data):
    command = data.draw(st.sampled_from(commands), label="command")
    op = data.draw(st.sampled_from(OPS), label="op")
    damage = data.draw(st.lists(mutation(), min_size=1, max_size=3), label="damage")
    # a damaged checkout also meets the full verdict's rows, in a third of the examples
    full_verdict = data.draw(st.sampled_from([True, False, False]), label="full verdict")
    pristine = read_tree(tree)
    try:
        for m in damage:
            apply_mutation(tree, *m)
        before = read_tree(tree)
        problems = check(tree, [command, "--root", str(tree), "--", op], before, outcomes,
                         full_verdict=full_verdict)
    finally:
        write_tree(tree, pristine)
    assert not problems, f"porter {command} {op} after {damage}: {problems}"


# --- the real exit path --------------------------------------------------------------------

def test_errors_through_python_m_porter(tmp_path):
    """A few of the cases above through a real `python -m porter` process."""
    repo = Path(__file__).resolve().parents[2]
    root = Path(shutil.copytree(fixture_root(), tmp_path / "pytorch"))
    (root / COMMON_MPS).write_bytes(b"\xff\xfe not utf-8\n")
    cases = [["new-op", "--root", str(root), "--", "../x"],
             ["new-op", "--root", str(root), "heavisde"],
             ["new-op", "--root", str(root), "heaviside"],           # common_mps.py not UTF-8
             ["migrate-from-mpsgraph", "--root", str(tmp_path / "nowhere"), "sign"]]
    for argv in cases:
        if argv[0] not in harness.editing_commands():
            continue
        proc = subprocess.run([sys.executable, "-m", "porter", *argv], cwd=repo, text=True,
                              capture_output=True, env={**os.environ, "PYTHONPATH": str(repo)})
        assert proc.returncode == 2, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (argv, proc.stderr)
        assert proc.stderr.startswith("porter: error: "), (argv, proc.stderr)
    assert read_tree(root)[COMMON_MPS] == b"\xff\xfe not utf-8\n"


def test_a_porter_bug_is_one_line_and_exit_70(monkeypatch, tmp_path):
    from porter.commands import new_op

    def broken(args):
        raise KeyError("boom\nsecond line")

    monkeypatch.setattr(new_op, "run", broken)
    result = porter("new-op", "heaviside")
    assert result.code == 70
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("porter: internal error: KeyError: 'boom")
    assert "test_fuzz.py:" in lines[0] and "please report it" in lines[0]
