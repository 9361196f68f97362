"""Every op of the real yaml through both editing commands (dry run): an answer, never a crash.

Each of the ~400 `.out` ops either plans (exit 0), is refused in one line naming why (exit 2), or
is an incomplete port, refused in one line naming what is missing (exit 1): no internal error,
no traceback. (~10 s: torchgen stays imported in this suite's process.)
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from porter.source.checkout import NATIVE_YAML
from porter.cli import main


def _out_ops(root) -> list[str]:
    text = (root / NATIVE_YAML).read_text()
    ops = sorted({m.group(1).rstrip("_") for m in re.finditer(r"^- func: ([a-z0-9_]+)\.out\(", text, re.M)})
    return ops


@pytest.mark.slow      # --full runs it, CI does
def test_every_op_gets_a_plan_or_a_one_line_refusal(real_tree_template):
    ops = _out_ops(real_tree_template)
    assert len(ops) > 300
    answers = {0: 0, 1: 0, 2: 0}
    for op in ops:
        for command in ("new-op", "migrate-from-mpsgraph"):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([command, op, "--dry-run", "--root", str(real_tree_template)])
            where = f"porter {command} {op}"
            assert code in answers, f"{where}: exit {code}: {err.getvalue()}"
            answers[code] += 1
            if code in (1, 2):
                assert err.getvalue().startswith("porter: error: ") and err.getvalue().count("\n") == 1, \
                    f"{where}: {err.getvalue()!r}"
    assert answers[0] and answers[2], answers       # both kinds of answer occur
