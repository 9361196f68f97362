"""Command-line entry point: parses arguments, dispatches to one command module.

Each command lives in its own module under `porter.commands` and exposes `HELP`,
`add_arguments(parser)` and `run(args) -> int`. Only the module of the command being run
is imported, so `porter new-op` never pays for the harness or the emulator.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from porter.errors import PorterError, one_line

# command name -> module under porter.commands
COMMANDS = {
    "new-op": "new_op",
    "migrate-from-mpsgraph": "migrate",
    "candidates": "candidates",
    "test": "test",
    "audit-xfails": "audit_xfails",
    "emulate": "emulate",
    "check": "check",
    "status": "status",
    "ci": "ci",
    "cache": "cache",
    "pr": "pr",
    "bench": "bench",
}

# Commands whose warm child (porter.runtime.warm) is forked before their modules are imported:
# command -> modules whose `warm_services()` it runs, in the order the command needs them
WARM_SERVICES = {
    "new-op": ("porter.port.templates", "porter.port.torchgen_check"),
    "migrate-from-mpsgraph": ("porter.port.templates", "porter.port.torchgen_check"),
}

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERNAL = 70           # EX_SOFTWARE: a porter bug (the one-line message says so)
EXIT_BROKEN_PIPE = 141       # 128 + SIGPIPE, what a shell reports for a tool cut off by `| head`

# Third-party modules porter imports -> what `pip install` takes for them. A missing one is an
# environment to fix (exit 2, naming the install), not a porter bug: `pip install porter-mps`
# brings all of them but torch, which stays the user's own (pyproject.toml says why).
DEPENDENCIES = {
    "numpy": "numpy", "expecttest": "expecttest", "yaml": "PyYAML", "jinja2": "Jinja2",
    "markupsafe": "Jinja2", "clang_format": "clang-format", "torch": "torch", "torchgen": "torch",
}


def _load(name: str):
    return importlib.import_module(f"porter.commands.{COMMANDS[name]}")


def _terminal():
    """The flags and output conventions every command shares (porter.commands.terminal),
    loaded by name as a command module is."""
    return importlib.import_module("porter.commands.terminal")


def _available() -> list[str]:
    names = []
    for name in COMMANDS:
        try:
            _load(name)
        except ModuleNotFoundError:
            continue
        names.append(name)
    return names


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every other porter error (exit 2)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, one_line(f"porter: error: {message} (see `{self.prog} --help`)") + "\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    terminal = _terminal()
    parser = _Parser(
        prog="porter",
        description="Port PyTorch operators to native Metal (MPS) kernels and prove the port works.",
    )
    from porter import __version__
    parser.add_argument("--version", action="version", version=f"porter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in ([only] if only else _available()):
        module = _load(name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        terminal.add_common(p)
        p.set_defaults(_module=module, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv[0] if argv else None
    if first not in WARM_SERVICES:      # nothing heavy to import alongside: no child to fork
        return _parse_and_run(argv, first)
    from porter.runtime import warm
    services = [s for m in WARM_SERVICES.get(first, ()) for s in importlib.import_module(m).warm_services()]
    with warm.forked_early(services):
        return _parse_and_run(argv, first)


def _parse_and_run(argv: list[str], first: str | None) -> int:
    parser = build_parser(first if first in COMMANDS else None)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:       # reported by the command's parser, whose --help lists what it takes
            getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as stop:      # --help, --version, a usage error: argparse has said it
        return stop.code if isinstance(stop.code, int) else EXIT_OK
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        _terminal().configure(args)
        code = int(args._module.run(args) or 0)
        sys.stdout.flush()      # a closed pipe shows up here, not at interpreter exit
        return code
    except PorterError as err:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, **err.to_json()}))
        else:
            print(f"{_terminal().paint('porter: error:', 'bold red', sys.stderr)} {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("porter: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`porter ... | head`): stop quietly, as a shell tool does
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except ModuleNotFoundError as err:
        package = DEPENDENCIES.get((err.name or "").split(".")[0])
        if package is None:
            return _internal_error(err)
        what = f"porter {args.command}"
        print(f"porter: error: {what} needs the Python module {err.name!r}, which is not installed "
              f"(pip install {package})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:
        return _internal_error(err)


def _internal_error(err: Exception) -> int:
    """A porter bug, never bad input (that is PorterError). One line, not a traceback;
    tests/reliability counts any of these as a failure."""
    if os.environ.get("PORTER_DEBUG"):
        raise err
    where = _innermost_frame(err)
    detail = " ".join(f"{type(err).__name__}: {err}".split())[:300]
    print(f"porter: internal error: {detail} at {where} (a porter bug: please report it "
          "with the command line; PORTER_DEBUG=1 shows the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


def _innermost_frame(err: BaseException) -> str:
    tb = err.__traceback__
    while tb and tb.tb_next:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # stdout replaced (tests) or closed
        pass
