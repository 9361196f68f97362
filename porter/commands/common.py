"""Arguments and steps shared by the editing commands."""

from __future__ import annotations



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


def default_test_device() -> str:
    """mps on Apple Silicon, else the host emulation of the Metal kernels."""
    import platform
    import sys

    return "mps" if sys.platform == "darwin" and platform.machine() == "arm64" else "emulate"


def run_tests_after(args, root) -> int:
    from porter.harness import run_after_edit

    return run_after_edit(args.op, root, args.device or default_test_device())
