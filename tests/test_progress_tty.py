"""Progress on a terminal (issue 36): `porter test`'s elapsed-time line is cleared before the
report's first line, also when the report is coloured (the coloured stream was made before
the line started and wrote past it)."""

from __future__ import annotations

import os
import re
import sys

import pytest

pexpect = pytest.importorskip("pexpect")


@pytest.mark.slow
def test_the_elapsed_line_is_cleared_before_the_header(mini_root, tmp_path):
    env = {**os.environ, "PORTER_CACHE_DIR": str(tmp_path / "cold"), "TERM": "xterm",
           "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    child = pexpect.spawn(sys.executable, ["-m", "porter", "test", "hypot", "--device", "emulate",
                                           "--dtype", "float32", "--root", str(mini_root)],
                          env=env, encoding="utf-8", timeout=600, dimensions=(50, 200))
    child.expect(pexpect.EOF)
    screen = child.before
    spinner = screen.find("running on emulate (")
    assert spinner >= 0, screen     # a cold build takes seconds: the line was shown
    header = re.search(r"hypot\s+\(xfail key", screen)
    assert header, screen
    # the spinner's last frame is wiped (\r ESC[K) before the header is written
    assert "\r\x1b[K" in screen[spinner:header.start()], repr(screen[spinner:header.start() + 40])
    after_clear = screen.rfind("\r\x1b[K", spinner, header.start())
    assert "running on emulate" not in screen[after_clear:header.start()]


# A listener registered before porter's own: at the second dtype's verdict it waits for a
# file the test writes. By then porter's row listener has printed the first row (it runs after
# this one), and the second row cannot be printed until the test lets the run go on: what the
# test sees on the screen meanwhile is what a user sees while later dtypes still run.
_GATED = """
import os, runpy, sys, time
from porter.harness import verdicts
calls = []
def gate(result, d):
    calls.append(d.dtype)
    if len(calls) == 2:
        open(os.environ['GATE'] + '.waiting', 'w').close()
        while not os.path.exists(os.environ['GATE']):
            time.sleep(0.05)
verdicts.listeners.append(gate)
sys.argv = ['porter'] + sys.argv[1:]
runpy.run_module('porter', run_name='__main__')
"""


def _env(tmp_path, **extra):
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200", "GATE": str(tmp_path / "gate"), **extra}
    env.pop("NO_COLOR", None)
    return env


_ARGS = ["test", "hypot", "--device", "emulate", "--dtype", "float32", "--dtype", "float16",
         "--samples-only"]


@pytest.mark.slow
def test_the_first_dtype_row_is_on_screen_while_the_next_dtype_runs(mini_root, tmp_path):
    child = pexpect.spawn(sys.executable, ["-c", _GATED, *_ARGS, "--root", str(mini_root)],
                          env=_env(tmp_path), encoding="utf-8", timeout=600, dimensions=(50, 200))
    # the gate is reached only after the first dtype's verdict: its row is on stderr by then
    child.expect(r"  hypot  (float\d+)\s+(?:\x1b\[[\d;]*m)?pass")
    first = child.match.group(1)
    second = "float16" if first == "float32" else "float32"
    waiting = tmp_path / "gate.waiting"
    for _ in range(600):
        if waiting.exists():
            break
        child.expect([pexpect.TIMEOUT], timeout=0.1)
    assert waiting.exists()
    # the run is held inside the second dtype: its row, the table and the summary are not out
    child.expect([pexpect.TIMEOUT], timeout=0.5)
    held = child.before + child.match.group(0) if isinstance(child.match, re.Match) else child.before
    assert child.isalive()
    screen = child.after if isinstance(child.after, str) else ""
    assert f"hypot  {second}" not in held + screen and "summary:" not in held + screen
    (tmp_path / "gate").touch()
    child.expect(pexpect.EOF)
    rest = child.before
    assert f"hypot  {second}" in rest and "summary: " in rest
    # stdout is the same terminal: the live rows are wiped (cursor up, clear) before the
    # table, which prints both dtypes again with its details
    wiped = rest.find("\x1b[2F\x1b[J")
    assert wiped >= 0, repr(rest)
    assert re.search(r"hypot\s+\(xfail key", rest[wiped:])


@pytest.mark.slow
def test_no_row_off_a_terminal_or_with_quiet_or_json(mini_root, tmp_path):
    import subprocess

    def run(*extra, pre=()):
        return subprocess.run([sys.executable, "-m", "porter", *pre, *_ARGS, "--root", str(mini_root),
                               *extra], env=_env(tmp_path), capture_output=True, text=True,
                              timeout=600)

    piped = run()
    assert "summary: " in piped.stdout
    assert "hypot  float32" not in piped.stderr and "\x1b" not in piped.stderr + piped.stdout
    # -v asks for progress off a terminal: the rows are plain lines on stderr, stdout unchanged
    loud = run(pre=("-v",))
    assert re.search(r"^  hypot  float32\s+pass", loud.stderr, re.M), loud.stderr
    def strip(text):     # the seconds column; the first run recorded the cache the second read
        text = text.replace("; samples and references cached (--no-cache recomputes)", "")
        return re.sub(r"\d+\.\d\d(?=\s|$)", "S", text)
    assert strip(loud.stdout) == strip(piped.stdout)


@pytest.mark.slow
def test_quiet_and_json_on_a_terminal_show_no_row(mini_root, tmp_path):
    for pre, extra in ((("-q",), ()), ((), ("--json",))):
        child = pexpect.spawn(sys.executable, ["-m", "porter", *pre, *_ARGS, "--root", str(mini_root),
                                               *extra],
                              env=_env(tmp_path), encoding="utf-8", timeout=600, dimensions=(50, 200))
        child.expect(pexpect.EOF)
        assert "hypot  float32" not in child.before, (pre, extra, child.before)
        assert "running on emulate" not in child.before or extra, child.before
