"""Command-line entry point: parses arguments, dispatches to one command module.

Each command lives in its own module under `porter.commands` and exposes `HELP`,
`add_arguments(parser)` and `run(args) -> int`. Only the module of the command being run
is imported, so `porter new-op` never pays for the harness or the emulator, and `porter
--help` imports none: it lists the summaries of the table below (tests/test_conventions.py
keeps each equal to its command's `HELP`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import re
import sys

from porter import exit_codes
from porter.errors import PorterError, one_line

# command name -> (module under porter.commands, its one-line summary: the module's HELP)
COMMANDS = {
    "new-op": ("new_op", "add a native Metal (MPS) kernel for an elementwise op: yaml, .metal, "
               ".mm, expectations"),
    "migrate-from-mpsgraph": ("migrate", "replace an elementwise op's MPSGraph implementation by "
                              "a native Metal kernel: yaml, old impl and its helpers, .metal, "
                              ".mm, expectations"),
    "candidates": ("candidates", "list elementwise ops still on MPSGraph or without MPS: kind, "
                   "files a port touches, and whether porter can write the kernel body itself"),
    "test": ("test", "run the OpInfo output-match test of ops on a device, per dtype "
             "(pass/fail/xfail/xpass/skip)"),
    "audit-xfails": ("audit_xfails", "run every op that has an xfail/skip entry in common_mps.py "
                     "and list the stale entries"),
    "emulate": ("emulate", "host emulation of the Metal kernels (no Apple GPU needed): `check` "
                "builds and compares them"),
    "check": ("check", "static checks over the whole tree: yaml dispatch, kernels, stubs, "
              "expectations, torchgen"),
    "status": ("status", "one screen on an op: yaml rows, MPS state, kernel, registrations, "
               "expectations, next command"),
    "ci": ("ci", "write .github/workflows/porter.yml: check + emulated and Apple-GPU tests of "
           "changed ops, sharded audits"),
    "cache": ("cache", "show or empty porter's caches (OpInfo samples and CPU references, built "
              "kernels)"),
    "pr": ("pr", "write the pull-request description of a port: what moved, files, verdicts, Mac "
           "test commands, checklist"),
    "bench": ("bench", "write (and on a Mac, run) the before/after benchmark of a port: MPSGraph "
              "path vs the Metal functor"),
    "completion": ("completion", "print a shell completion script (bash, zsh or fish) generated "
                   "from porter's own parser"),
}

# What `porter CMD --help` ends with, as `gh` prints its examples: (what it does, command line).
EXAMPLES = {
    "new-op": [("port an op with no MPS kernel yet, then test it", "porter new-op heaviside"),
               ("show the diff only", "porter new-op heaviside --dry-run")],
    "migrate-from-mpsgraph": [("move an op off MPSGraph", "porter migrate-from-mpsgraph hardsigmoid"),
                              ("show the diff only", "porter migrate-from-mpsgraph sign --dry-run")],
    "candidates": [("what is left to port", "porter candidates"),
                   ("port each in memory and test it", "porter candidates --verify")],
    "test": [("every dtype the MPS test sends, on this Linux machine", "porter test heaviside --device emulate"),
             ("one dtype, re-run on every save", "porter test heaviside --dtype float16 --watch")],
    "audit-xfails": [("list stale expectation entries", "porter audit-xfails"),
                     ("remove them, showing the diff first", "porter audit-xfails --prune-xfails --dry-run")],
    "emulate": [("build and compare every kernel file", "porter emulate check")],
    "check": [("every static check over the tree", "porter check"),
              ("only what the branch touched", "porter check --changed-since origin/main")],
    "status": [("where one op stands", "porter status heaviside")],
    "ci": [("write the fork's workflow", "porter ci init"),
           ("show it first", "porter ci init --dry-run")],
    "cache": [("what porter has cached", "porter cache info"), ("empty it", "porter cache clear")],
    "pr": [("the pull-request description of the branch's ports", "porter pr heaviside -o pr.md")],
    "bench": [("write the before/after benchmark script", "porter bench heaviside --write-only")],
    "completion": [("bash, for this shell", 'eval "$(porter completion bash)"'),
                   ("zsh, installed", "porter completion zsh > ~/.zfunc/_porter")],
}

# Options every command takes, also before the command (`porter -q test OP`, `porter --root
# DIR status OP`), as git and cargo take theirs: they are moved behind the command, whose
# parser reads them. --root is taken by the commands that read a checkout; another command
# refuses it as it refuses any option it lacks.
GLOBAL_FLAGS = ("-q", "--quiet", "-v", "--verbose")
GLOBAL_VALUED = ("--color", "--root")

# Commands whose warm child (porter.runtime.warm) is forked before their modules are imported:
# command -> modules whose `warm_services()` it runs, in the order the command needs them
WARM_SERVICES = {
    "new-op": ("porter.port.templates", "porter.port.torchgen_check"),
    "migrate-from-mpsgraph": ("porter.port.templates", "porter.port.torchgen_check"),
}


# Third-party modules porter imports -> what `pip install` takes for them. A missing one is an
# environment to fix (exit 2, naming the install), not a porter bug: `pip install porter-mps`
# brings all of them but torch, which stays the user's own (pyproject.toml says why).
DEPENDENCIES = {
    "numpy": "numpy", "expecttest": "expecttest", "yaml": "PyYAML", "jinja2": "Jinja2",
    "markupsafe": "Jinja2", "clang_format": "clang-format", "torch": "torch", "torchgen": "torch",
}


def _load(name: str):
    return importlib.import_module(f"porter.commands.{COMMANDS[name][0]}")


def _terminal():
    """The flags and output conventions every command shares (porter.commands.terminal),
    loaded by name as a command module is."""
    return importlib.import_module("porter.commands.terminal")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every other porter error (exit 2). No abbreviations:
    `--dtyp` is not `--dtype` (an abbreviation that works today breaks when a second option
    of that prefix is added); a misspelt option gets a suggestion instead."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        hint = f"see `{self.prog} --help`"
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown and unknown.group(1).startswith("--"):
            near = difflib.get_close_matches(unknown.group(1).split("=", 1)[0],
                                             [o for o in self._option_string_actions
                                              if o.startswith("--")], n=1)
            if near:
                hint = f"did you mean {near[0]}? {hint}"
        self.exit(exit_codes.BAD_INPUT, one_line(f"porter: error: {message} ({hint})") + "\n")


_TOP_EPILOG = """\
options every command takes, before or after it:
  -q, --quiet           no notes or progress on stderr
  -v, --verbose         progress even off a terminal, tables not cut to the terminal's width
  --color WHEN          auto (on a terminal, unless NO_COLOR is set), always or never
  --root DIR            the PyTorch checkout, for the commands that read one (default: the
                        one around the current directory)

examples:
  # what is left to port on this checkout
  $ porter candidates
  # port an op, then test it on this Linux machine
  $ porter new-op heaviside
  $ porter test heaviside --device emulate
  # one command's options
  $ porter help test"""


def _examples(name: str) -> str | None:
    rows = EXAMPLES.get(name)
    if not rows:
        return None
    return "examples:\n" + "\n".join(f"  # {what}\n  $ {line}" for what, line in rows)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    terminal = _terminal()
    parser = _Parser(
        prog="porter",
        description="Port PyTorch operators to native Metal (MPS) kernels and prove the port works.",
        epilog=None if only is not None else _TOP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from porter import __version__
    parser.add_argument("-V", "--version", action="version", version=f"porter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    if only is None:        # `porter --help`, no command or a misspelt one: the summaries only
        for name, (_, summary) in COMMANDS.items():
            sub.add_parser(name, help=summary, description=summary)
        sub.add_parser("help", help="a command's help: `porter help COMMAND` is `porter COMMAND --help`")
        return parser
    module = _load(only)
    p = sub.add_parser(only, help=module.HELP, description=module.HELP, epilog=_examples(only),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(p)
    terminal.add_common(p)
    # `porter completion` reads every command's parser through these, not by importing cli
    p.set_defaults(_module=module, _parser=p, _build_parser=build_parser, _commands=tuple(COMMANDS))
    return parser


def _command_first(argv: list[str]) -> list[str]:
    """`porter [GLOBAL OPTIONS] COMMAND ...` as the command's parser reads it: the global
    options moved behind the command. `porter help [COMMAND]` is `porter [COMMAND] --help`.
    Any other option before the command is an error naming where it goes."""
    moved, i = [], 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-h", "--help",
                                                                        "-V", "--version"):
        name = argv[i].split("=", 1)[0]
        if name in GLOBAL_FLAGS or re.fullmatch(r"-v+", name):
            moved.append(argv[i])
            i += 1
        elif name in GLOBAL_VALUED and ("=" in argv[i] or i + 1 < len(argv)):
            step = 1 if "=" in argv[i] else 2
            moved += argv[i:i + step]
            i += step
        else:
            later = next((a for a in argv[i + 1:] if a in COMMANDS), None)
            raise PorterError(f"{name} is an option of a command, not of porter itself",
                              hint=f"write it after the command: porter {later or 'COMMAND'} "
                                   f"... {name}")
    rest = argv[i:]
    if rest and rest[0] == "help":
        if len(rest) == 1:
            return ["--help"]
        return [rest[1], "--help"]
    if not moved or not rest:
        return argv if not moved else rest + moved
    return [rest[0], *moved, *rest[1:]]


def _unknown_command(name: str) -> PorterError:
    near = difflib.get_close_matches(name, list(COMMANDS), n=1)
    return PorterError(f"unknown command {name!r}",
                       hint=(f"did you mean `porter {near[0]}`? " if near else "")
                            + "see `porter --help`")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from porter.runtime import run_memo
    run_memo.forget()          # each command is a run: it reads the checkout afresh
    try:
        argv = _command_first(argv)
        first = argv[0] if argv else None
        if first is not None and not first.startswith("-") and first not in COMMANDS:
            raise _unknown_command(first)
    except PorterError as err:
        print(f"porter: error: {err}", file=sys.stderr)
        return err.exit_code
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
        return stop.code if isinstance(stop.code, int) else exit_codes.OK
    if not getattr(args, "command", None):
        parser.print_help()
        return exit_codes.BAD_INPUT
    if not hasattr(args, "_module"):    # the command came after an option: parse for it alone
        return _parse_and_run(argv, args.command)
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
        return exit_codes.INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`porter ... | head`): stop quietly, as a shell tool does
        _silence_stdout()
        return exit_codes.BROKEN_PIPE
    except ModuleNotFoundError as err:
        package = DEPENDENCIES.get((err.name or "").split(".")[0])
        if package is None:
            return _internal_error(err)
        what = f"porter {args.command}"
        print(f"porter: error: {what} needs the Python module {err.name!r}, which is not installed "
              f"(pip install {package})", file=sys.stderr)
        return exit_codes.BAD_INPUT
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
    return exit_codes.INTERNAL


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
