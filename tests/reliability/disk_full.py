"""Run porter on a really full disk; run by test_faults.py inside `unshare -rm` (a private user
and mount namespace), where it may mount a tmpfs.

    disk_full.py TREE MOUNTPOINT COMMAND OP

Copies TREE onto a fresh tmpfs, learns what a clean COMMAND OP writes, then for a range of
free-space amounts fills the disk to leave that much and runs porter: each run must either
complete or fail with a one-line "No space left on device" error leaving every file as it
was and no temporary file; a re-run with space again must complete. Prints one summary line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

os.environ["PORTER_NO_FORK"] = "1"

from tests.reliability.harness import one_line_error, porter, read_tree, write_tree  # noqa: E402

PAGE = 4096


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(mount: Path, leave: int) -> Path:
    filler = mount / "filler"
    want = free_bytes(mount) - leave
    with open(filler, "wb") as f:
        chunk = b"\0" * (64 * 1024)
        while want > 0:
            n = min(want, len(chunk))
            try:
                f.write(chunk[:n])
                f.flush()
            except OSError:
                break
            want -= n
    return filler


def main() -> int:
    src, mount, command, op = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    mount.mkdir(parents=True, exist_ok=True)
    size = sum(len(v) for v in read_tree(src).values())
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={3 * size + 1024 * 1024}", "tmpfs",
                    str(mount)], check=True)
    tree = mount / "tree"
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git"))
    old = read_tree(tree)
    argv = [command, "--root", str(tree), "--no-test", "--", op]   # the port, not its test
    clean = porter(*argv)
    assert clean.code == 0, clean.err
    new = read_tree(tree)
    needed = sum(len(new[k]) for k in new if old.get(k) != new[k])
    problems, runs, enospc, completed = [], 0, 0, 0
    for leave in range(0, needed + 8 * PAGE, PAGE // 2):
        write_tree(tree, old)
        filler = fill(mount, leave)
        result = porter(*argv)
        filler.unlink()
        runs += 1
        now = read_tree(tree)
        temps = [k for k in now if k.endswith(".porter-tmp")]
        if result.code == 0:
            completed += 1
            if now != new:
                problems.append(f"leave {leave}: exit 0 but the tree is not the new tree")
        elif one_line_error(result) and "No space left on device" in result.err:
            enospc += 1
            if now != old or temps:
                problems.append(f"leave {leave}: failed but changed the tree ({temps})")
            again = porter(*argv)
            if again.code != 0 or read_tree(tree) != new:
                problems.append(f"leave {leave}: the re-run did not complete: {again.err.strip()}")
        else:
            problems.append(f"leave {leave}: exit {result.code}: {result.err.strip()}")
    for p in problems:
        print(p)
    print(f"disk-full runs: {runs}, enospc {enospc}, completed {completed}, problems {len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
