"""Arguments and steps shared by the editing commands."""

from __future__ import annotations

from porter.changes import ChangeSet


def add_root_and_json(parser) -> None:
    parser.add_argument("--root", metavar="DIR",
                        help="PyTorch checkout (default: the one containing the current directory)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def add_edit_options(parser) -> None:
    parser.add_argument("op", metavar="OP", help="operator name, e.g. heaviside or special_log_ndtr")
    add_root_and_json(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="print per-file status and the unified diff; write nothing")
    parser.add_argument("--body", metavar="EXPR",
                        help="Metal expression of the functor body, in x (unary) or a and b (binary)")
    parser.add_argument("--complex-body", metavar="EXPR",
                        help="Metal expression of the functor's complex overload (x, or a and b, "
                             "are float2/half2: .x real, .y imaginary); registers complex64")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="edit files even if they have uncommitted changes in git")
    parser.add_argument("--test", action="store_true",
                        help="run `porter test OP` right after applying")
    parser.add_argument("--device", default=None,
                        help="device for --test (mps, cuda, emulate; default: mps if available, else emulate)")


def apply_unless_dry(changes: ChangeSet, dry_run: bool, allow_dirty: bool = False,
                     flag: str = "--allow-dirty") -> list[str] | None:
    """Write the changes unless this is a dry run. Files about to be written must have no
    uncommitted changes in git unless `allow_dirty`, which the command's option `flag` sets
    (porter.vcs says why)."""
    if dry_run:
        return None
    if changes and not allow_dirty:
        from porter.vcs import refuse_dirty
        refuse_dirty(changes.root, [c.path for c in changes.pending], flag)
    written = changes.apply()      # with nothing pending: only sweeps a killed run's temp files
    return written or None


def default_test_device() -> str:
    """mps on Apple Silicon, else the host emulation of the Metal kernels."""
    import platform
    import sys

    return "mps" if sys.platform == "darwin" and platform.machine() == "arm64" else "emulate"


def run_tests_after(args, root) -> int:
    from porter.harness import run_after_edit

    return run_after_edit(args.op, root, args.device or default_test_device())
