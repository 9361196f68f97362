"""Arguments and steps shared by the editing commands."""

from __future__ import annotations

from porter import exit_codes


def add_root_and_json(parser, formats: tuple[str, ...] = ("text", "json"), what: dict | None = None) -> None:
    from porter.commands.terminal import add_format

    parser.add_argument("--root", metavar="DIR",
                        help="PyTorch checkout (default: the one containing the current directory)")
    add_format(parser, formats, what)


def add_edit_options(parser) -> None:
    parser.add_argument("op", metavar="OP", help="operator name (heaviside, special_log_ndtr) or its OpInfo's "
                        "name (nn.functional.threshold, special.log_ndtr)")
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
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="write a port that leaves a dtype without a kernel or a functor without "
                             "a body (exit status stays 1; porter lists the MPS tests that fail)")
    parser.add_argument("--no-build", action="store_true",
                        help="do not build the planned .metal files before writing (no C++ compiler)")
    parser.add_argument("--test", action="store_true",
                        help="(the default) test the op right after writing it, as `porter test` does: "
                             "upstream's samples, the reference inputs and the shapes; exit 1 "
                             "when a dtype fails")
    parser.add_argument("--no-test", action="store_true",
                        help="write the port without testing it (porter says so)")
    parser.add_argument("--device", default="auto",
                        help="device of the test after writing (auto, mps, cuda, emulate; default "
                             "auto: mps on a Mac, else emulate)")


def aten_op_name(checkout, name: str) -> str:
    """The aten op a command's OP names. Every command takes the OpInfo's spelling too:
    nn.functional.threshold -> threshold, special.log_ndtr -> special_log_ndtr,
    round.decimals_0 -> round (as `porter test` does); a yaml name is itself."""
    from porter.source.opinfo_source import aten_op

    if name.startswith("_refs."):
        # a python_ref_db OpInfo (_refs.heaviside, _refs.nn.functional.threshold) tests torch's
        # Python reference of the same op, against the same aten kernel
        return aten_op_name(checkout, name[len("_refs."):])
    found = aten_op(checkout, name)
    if found:
        return found
    rest = name[len("nn.functional."):] if name.startswith("nn.functional.") else ""
    return rest if rest and "." not in rest else name


def default_test_device() -> str:
    """mps on Apple Silicon, else the host emulation of the Metal kernels."""
    import platform
    import sys

    return "mps" if sys.platform == "darwin" and platform.machine() == "arm64" else "emulate"


def _missing(*modules: str) -> str | None:
    """The first of `modules` that is not installed, or None."""
    import importlib.util

    for module in modules:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):
            return module
    return None


def require(command: str, *modules: str) -> None:
    """Exit 2 naming the install when a module `command` needs is missing, before any work
    (torch would otherwise warn about a missing numpy and fail later, in its own words)."""
    import importlib.util

    from porter.errors import PorterError

    packages = {"numpy": "numpy", "expecttest": "expecttest", "torch": "torch"}
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise PorterError(f"porter {command} needs the Python module '{module}', which is not installed",
                              hint=f"pip install {packages.get(module, module)}")


# torch's dtype names, as a run's tables print them (str(dtype) without "torch.")
DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128")
# torch's other spellings (torch.half is torch.float16): suggested, the table's name asked for
ALIASES = {"half": "float16", "float": "float32", "double": "float64", "short": "int16",
           "int": "int32", "long": "int64", "chalf": "complex32", "cfloat": "complex64",
           "cdouble": "complex128"}


def check_dtype_names(names) -> None:
    """A --dtype that names no torch dtype is bad input (exit 2), not a run that tests nothing."""
    import difflib

    from porter.errors import PorterError
    for name in names or ():
        if name not in DTYPE_NAMES:
            near = [ALIASES[name]] if name in ALIASES else \
                difflib.get_close_matches(name, DTYPE_NAMES, n=1)
            raise PorterError(f"--dtype {name}: not a torch dtype name",
                              hint=f"did you mean {near[0]}?" if near else
                              "one of " + ", ".join(DTYPE_NAMES))


def resolve_device(device: str | None) -> str:
    """`--device auto` (every command's default): mps on a Mac, else emulate."""
    return default_test_device() if device in (None, "auto") else device


def run_tests_after(args, root, op: str, rerun: bool = False) -> tuple[int, dict]:
    """The verdict that ends a port which wrote files, or a rerun over them: the op's test
    (porter.harness.verdict_scope.FULL, what `porter test` runs) on the device, its table, and exit 1 when a dtype fails.

    Returns (exit code, the verdict for --json: "tested", "ok", "why" and the test's own
    report), so that the port's one JSON document says what its exit status says."""
    import sys

    if args.no_test:
        done = "were written already" if rerun else "were written"
        note = (f"--no-test: the files {done} and {op} was not tested; `porter test "
                f"{op} --device emulate` gives the verdict")
        print(f"note: {note}", file=sys.stderr)
        return exit_codes.OK, {"tested": False, "ok": None, "why": [note]}
    device = resolve_device(args.device)
    missing = _missing("numpy", "torch")
    if missing:
        # checked before torch is imported: torch without numpy warns in its own words, and the
        # run would fail later; nothing was tested, which is no red verdict on the port
        print(f"porter: error: the files were written; {op} was not tested: `porter test` needs the "
              f"Python module '{missing}', which is not installed (pip install {missing}, then "
              f"`porter test {op} --device {device}`)", file=sys.stderr)
        return exit_codes.BAD_INPUT, {"tested": False, "ok": None,
                                      "why": [f"not tested: pip install {missing}"]}
    if device == "emulate":
        from porter.emulate.toolchain import compiler
        from porter.errors import PorterError
        try:
            compiler()
        except PorterError:
            note = (f"{op} was not tested: no C++ compiler for the Metal emulator (set CXX, "
                    f"or run `porter test {op}` on a Mac)")
            print(f"note: {note}", file=sys.stderr)
            return exit_codes.OK, {"tested": False, "ok": None, "why": [note]}
    import contextlib
    import io
    import json

    from porter.commands import terminal
    from porter.checks.reference_base import default_reference_gaps
    from porter.harness import run_after_edit
    out = io.StringIO() if args.json else None      # stdout holds the port's JSON
    # the CPU reference as `porter test` judges it: a branch that edits the op's CPU kernel
    # leaves it not proven here too (review 42's F1: the port command and its rerun said green)
    gaps = default_reference_gaps(root, [op])
    # the test takes seconds to minutes: a timer and each dtype's row on a terminal's stderr
    with terminal.Elapsed(f"testing {op} on {device}") as elapsed:
        rows = contextlib.nullcontext() if args.json else terminal.live_rows(elapsed)
        with rows:
            counts: dict = {}
            try:
                code = run_after_edit(op, root, device, out=out, json=args.json,
                                      verdict_counts=counts, reference_gaps=gaps)
            except KeyboardInterrupt:
                # the files stay as written; say so before the CLI's "interrupted" (a new user's L5)
                print(f"porter: the files were written; the test of {op} was interrupted before "
                      f"its verdict (`porter test {op} --device {device}` runs it)", file=sys.stderr)
                raise
    verdict: dict = {"tested": True, "device": device, "ok": code == exit_codes.OK}
    if out is not None and out.getvalue().strip():
        report = json.loads(out.getvalue())
        verdict["why"] = report.pop("why", [])
        verdict["report"] = report
    if code != exit_codes.OK:
        again = (f"`porter test {op} --device {device}` reruns it, "
                 "`--no-test` skips it")
        # red only where porter cannot tell (every failing dtype "not proven"): the next step
        # is another spelling or a Mac, not a fix of a mismatch (docs/testing.md)
        state = ((f"not proven, so not green: whether {op} passes on a Mac is not known on "
                  f"{device} (the rows' \"not proven\" says why)") if counts.get("only_not_proven")
                 else f"red: {op} fails its test on {device}")
        red = (f"the port was written before and is {state}" if rerun
               else f"the files were written and are {state}")
        verdict.setdefault("why", []).insert(0, f"{red} ({again})")
        where = "" if args.json else "table above; "
        print(f"porter: error: {red} ({where}{again})", file=sys.stderr)
        return exit_codes.FAILED, verdict
    return exit_codes.OK, verdict


def finish_edit(command: str, checkout, plan, args, extra: dict) -> int:
    """Check the planned port (porter.commands.before_writing), write it unless it is refused, report it.

    Exit status: 0 for a complete port that is green (or nothing to write and the port written
    before green), 1 for a red one or an incomplete one, written
    only with --allow-incomplete; a port that does not build is refused (exit 1) before this."""
    from porter.apply.report import show_plan
    from porter.apply.write import apply_unless_dry
    from porter.commands.before_writing import verify

    outcome = verify(command, checkout, plan, body=args.body, complex_body=args.complex_body,
                     build=not args.no_build)
    incomplete = outcome.incomplete
    notes = plan.notes + outcome.notes
    if incomplete and not args.allow_incomplete:
        show_plan(command, plan.spec.op, plan.changes, notes, dry_run=args.dry_run,
                  applied=None, as_json=args.json, extra=extra, refused=incomplete)
        return exit_codes.FAILED
    # a rerun over files the command already wrote has nothing to write, and its verdict is
    # the port's now: tested as after a write, so that red stays red (exit 1), never "nothing
    # to do" (asked before writing: a written ChangeSet has nothing pending either)
    rerun = not plan.changes and not args.dry_run and not incomplete
    written = apply_unless_dry(plan.changes, args.dry_run, args.allow_dirty)
    test = (written or rerun) and not incomplete
    verdict = None
    code = exit_codes.FAILED if incomplete else exit_codes.OK
    if test and args.json:
        # --json: one document, printed after the verdict, whose "ok" is the exit status's
        code, verdict = run_tests_after(args, checkout.root, plan.spec.op, rerun)
    show_plan(command, plan.spec.op, plan.changes, notes, dry_run=args.dry_run, applied=written,
              as_json=args.json, extra=extra, incomplete=incomplete, verdict=verdict,
              quiet=getattr(args, "quiet", False),
              # --no-test: the user declined the verdict; "nothing to do" (with the note
              # that says it was not tested) is about writing only
              retest="every file is already as planned; testing the port"
              if rerun and not args.no_test else
              # a dry run tests nothing: "nothing to do" would read as green (review 42's F8)
              (f"every file is already as planned; --dry-run does not test it (`porter test "
               f"{plan.spec.op} --device emulate` gives its verdict)")
              if args.dry_run and not plan.changes and not incomplete else None)
    if test and not args.json:
        code, _ = run_tests_after(args, checkout.root, plan.spec.op, rerun)
        if rerun and code == exit_codes.OK and not args.no_test:
            print(f"porter {command} {plan.spec.op}: nothing to do (the port is written, and green)")
    return code
