"""The command-output samples of README.md and docs/*.md, checked against real runs.

A checked sample is a fenced block whose first line is `$ porter ...`, preceded by a marker:

    <!-- sample -->                         every line of the output
    <!-- sample keep="^heaviside |^  float32 " -->
                                             only the lines the regex finds; each run of
                                             lines left out is one `...` line

`<!-- sample-run: porter ... -->` runs a command whose output is not shown (a step the page
takes for granted). The samples of one page run in page order in one fresh copy of
fixtures/mini-pytorch, committed as the README says (`cp -r`, `git init`, `git commit`), at
COLUMNS=100 with stdout and stderr in one stream, unbuffered, as a 100-column terminal without
colour shows them.

What honestly varies is normalised on both sides before they are compared: the seconds column
of a `porter test` table, `N.NN s` timings, the header's note that the references came from
the cache, and the copy's path (written /tmp/mini, as the
README's walk has it). `EXPECTTEST_ACCEPT=1` rewrites every block from the real output.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHOWN_ROOT = "/tmp/mini"
MARKER = re.compile(r'^<!-- sample(?: keep="(?P<keep>[^"]*)")? -->$')
HIDDEN = re.compile(r"^<!-- sample-run: (?P<cmd>.+) -->$")


@dataclass
class Sample:
    page: Path
    line: int                 # 1-based line of the `$ porter ...` line
    command: str              # as shown, without a trailing `# comment`
    keep: str | None
    body: list[str]           # the output lines the page shows
    end: int                  # index of the closing fence in the page's lines
    hidden: bool = False


def samples(page: Path) -> list[Sample]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found = []
    for i, line in enumerate(lines):
        hidden = HIDDEN.match(line)
        if hidden:
            found.append(Sample(page, i + 1, hidden.group("cmd"), None, [], i, hidden=True))
            continue
        m = MARKER.match(line)
        if not m:
            continue
        assert lines[i + 1].startswith("```") and lines[i + 2].startswith("$ porter "), \
            f"{page.name}:{i + 1}: a sample marker is followed by a ``` block whose first line is `$ porter ...`"
        end = next(j for j in range(i + 3, len(lines)) if lines[j].startswith("```"))
        # as shown, less a trailing `# comment`; run() splits it as a shell would
        command = lines[i + 2][2:]
        if "#" in command:
            command = re.sub(r"\s+#[^'\"]*$", "", command)
        found.append(Sample(page, i + 3, command, m.group("keep"), lines[i + 3:end], end))
    return found


def tree(dest: Path) -> Path:
    """The README's copy of the bundled tree, committed."""
    root = Path(shutil.copytree(REPO / "fixtures" / "mini-pytorch", dest))
    git = ["git", "-c", "user.name=doc", "-c", "user.email=doc@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "mini-pytorch"], cwd=root, check=True)
    return root


def run(sample: Sample, root: Path, env: dict) -> list[str]:
    argv = shlex.split(sample.command, comments=True)
    assert argv[0] == "porter", sample.command
    proc = subprocess.run([sys.executable, "-m", "porter", *argv[1:]], cwd=root, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    return proc.stdout.replace(str(root), SHOWN_ROOT).rstrip("\n").split("\n")


def environment() -> dict:
    """The test's environment (its session cache included: whether a run found its references
    cached shows only in a header note, which normal() removes)."""
    env = {**os.environ, "COLUMNS": "100", "PYTHONUNBUFFERED": "1",
           "GIT_AUTHOR_NAME": "doc", "GIT_AUTHOR_EMAIL": "doc@example.com",
           "GIT_COMMITTER_NAME": "doc", "GIT_COMMITTER_EMAIL": "doc@example.com"}
    env.pop("NO_COLOR", None)
    return env


def shown(sample: Sample, output: list[str]) -> list[str]:
    """The lines the page should show: all, or the kept ones with `...` for each gap."""
    lines: list[str] = []
    if sample.keep is None:
        return output
    keep = re.compile(sample.keep)
    gap = False
    for line in output:
        if keep.search(line):
            lines.append(line)
            gap = False
        elif not gap:
            lines.append("...")
            gap = True
    return lines


_ROW = re.compile(r"^  \S+\s+(?:pass|fail|xfail|xpass|skip)\s")


def _seconds_column(line: str) -> str:
    """A `porter test` row's 7th cell (dtype outcome samples max_abs max_rel first_fail
    seconds [upstream]) as S."""
    if not _ROW.match(line):
        return line
    cells = list(re.finditer(r"\S+", line))
    if len(cells) < 7 or not re.fullmatch(r"\d+\.\d\d", cells[6].group()):
        return line
    return line[:cells[6].start()] + "S" + line[cells[6].end():]


def normal(lines: list[str]) -> list[str]:
    """What honestly varies, made one: a table's seconds column, `N.N s` timings."""
    return [re.sub(r"\b\d+(?:\.\d+)? s\b", "N s", _seconds_column(line)).replace(_CACHED, "")
            for line in lines]


_CACHED = "; samples and references cached (--no-cache recomputes)"


def rewrite(page: Path, fixes: list[tuple[Sample, list[str]]]) -> None:
    """Each sample's block body replaced by its real output (from the last block up)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    for sample, body in sorted(fixes, key=lambda f: -f[0].line):
        lines[sample.line:sample.end] = body
    page.write_text("\n".join(lines), encoding="utf-8")
