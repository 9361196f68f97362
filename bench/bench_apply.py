"""What issue 7's safety costs: the dirty-tree check (one `git status`) and the safe write
(temp file + fsync + rename, lock, freshness check) against a whole `porter new-op`.

The real-size tree is padded with 20,000 committed files so that git's index has the size of a
PyTorch checkout's (~20k tracked files outside submodules).

    python bench/bench_apply.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import porter_argv, real_tree, time_call, time_process

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from porter.source.checkout import Checkout  # noqa: E402
from porter.port.resolve import resolve  # noqa: E402
from porter.port.plan import plan_port  # noqa: E402
from porter.apply.vcs import dirty_files  # noqa: E402

PADDING = 20_000


def pad(root: Path) -> None:
    for i in range(PADDING):
        d = root / "third_party_pad" / f"d{i // 500}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.cpp").write_text(f"// {i}\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "pad"],
                   cwd=root, check=True)


def main() -> None:
    root = real_tree()
    pad(root)
    checkout = Checkout.at(root)
    plan = plan_port(checkout, resolve(checkout, "heaviside"))
    targets = [c.path for c in plan.changes.pending]
    check_best, check_median = time_call(lambda: dirty_files(root, targets))

    pristine = {rel: (root / rel).read_bytes() for rel in targets}

    def apply_once():
        plan.changes.apply()
        for rel, data in pristine.items():
            (root / rel).write_bytes(data)
    apply_best, apply_median = time_call(apply_once)

    def restore():
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=root, check=True)
    whole = []
    for _ in range(5):
        restore()
        start = time.perf_counter()
        subprocess.run(porter_argv("new-op", "heaviside", "--root", str(root)), check=True,
                       stdout=subprocess.DEVNULL)
        whole.append(time.perf_counter() - start)
    restore()
    dry_best, _ = time_process(porter_argv("new-op", "heaviside", "--dry-run", "--root", str(root)))
    whole_best = min(whole)
    print(f"real-size tree + {PADDING} tracked files: {root}")
    print(f"dirty-tree check (git status of {len(targets)} files): best {check_best * 1000:.1f} ms, "
          f"median {check_median * 1000:.1f} ms")
    print(f"ChangeSet.apply of {len(targets)} files (lock, stage+fsync, check, rename): "
          f"best {apply_best * 1000:.1f} ms, median {apply_median * 1000:.1f} ms")
    print(f"porter new-op heaviside, whole process: best {whole_best * 1000:.0f} ms "
          f"(--dry-run: {dry_best * 1000:.0f} ms)")
    print(f"ratio: the dirty check is {check_best / whole_best:.1%} and the safe write "
          f"{apply_best / whole_best:.1%} of a whole new-op")
    shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
