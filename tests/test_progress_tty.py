"""Progress on a terminal (issue 36): `porter test`'s elapsed-time line is cleared before the
report's first line, also when the report is coloured (the coloured stream was made before
the line started and wrote past it)."""

from __future__ import annotations

import os
import re
import sys

import pytest

pexpect = pytest.importorskip("pexpect")


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
