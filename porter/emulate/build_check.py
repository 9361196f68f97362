"""Build before write: the planned `.metal` files and the user's `--body` go through the C++
compiler (porter's Metal emulation, porter.emulate.build) before anything is written.

A planned kernel file is checked by a probe: a syntax pass of the whole planned file that
instantiates only the new kernel's registrations (~0.05 s; a full build of a file costs ~1.3 s),
cached by content hash. An error the original file already had is not the plan's: where the
original does not pass the probe either (a construct the emulation does not model), the plan
is judged by a full quarantining build of both, and only what is new counts.
"""

from __future__ import annotations

import re
import shutil
import os

from porter import exit_codes
from porter.errors import PorterError
from porter.emulate.toolchain import REGISTERED_AS
from porter.source.metal_scan import SKELETON_MARK

INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[^\n]*$|^using namespace [\w:]+;$", re.M)


class BuildRefused(PorterError):
    """A planned file does not build: a failed check, not bad usage. `error` is the compiler's
    first error alone, where the message wraps it, for a caller that words the refusal anew."""
    exit_code = exit_codes.FAILED

    def __init__(self, message: str, *, error: str | None = None, **where):
        super().__init__(message, **where)
        self.error = error


class NoCompiler(PorterError):
    exit_code = exit_codes.FAILED


def compiler_available() -> bool:
    cxx = os.environ.get("CXX")
    if cxx:
        return bool(shutil.which(cxx) or os.path.isfile(cxx))
    return bool(shutil.which("g++") or shutil.which("c++"))


def require_compiler(command: str) -> None:
    if not compiler_available():
        raise NoCompiler(f"no C++ compiler found: porter {command} builds the planned kernel file "
                         "before writing it", hint="install g++ or set CXX; or pass --no-build to "
                         "write it unbuilt")


def check_expression(option: str, expression: str, params: tuple[str, ...], metal_text: str,
                     root, op: str, *, complex_: bool = False) -> None:
    """Compile `expression` as the result of a functor of `params` (exit 2 when it is not one
    expression that compiles).

    First with `metal_text`'s includes alone (cheap, and blind to what the file's own text
    does wrong); where that fails, inside the whole kernel file, which is where the functor
    will sit: a body may call the file's own helpers (`exp_(x)`, `log_functor{}(x)`), as the
    file's functors do. The planned file's own build is the backstop for the rest."""
    from porter.emulate.probe import probe_source

    preamble = "\n".join(m.group() for m in INCLUDE_RE.finditer(metal_text))
    functor = _probe_functor(expression, params, complex_)
    error = probe_source(f"{preamble}\n{functor}", option, root, ())
    if error is not None and metal_text.strip():
        # the probe functor after the whole file: its lines start after the file's
        first_probe_line = metal_text.count("\n") + 2
        in_file = probe_source(f"{metal_text}\n{functor}", option, root, ())
        if in_file is None:
            return
        line = re.match(rf"{re.escape(option)}:(\d+): ", in_file)
        if line and int(line.group(1)) >= first_probe_line:
            error = in_file
    if error is not None:
        message = error.split(": ", 1)[1] if error.startswith(f"{option}:") else error
        raise PorterError(f"{option} {expression.strip()!r} for {op} does not compile as one Metal "
                          f"expression in {' and '.join(params)}: {message}",
                          hint=f"pass one expression (no `return`, no `;`), e.g. {option} "
                               f"'{_example(params, complex_)}'")


def _probe_functor(expression: str, params: tuple[str, ...], complex_: bool) -> str:
    value_type = "float2" if complex_ else "float"
    args = ", ".join(f"const T {p}" for p in params)
    call = ", ".join(f"{value_type}()" for _ in params)
    # The expression sits alone on its own line, so the compiler's line names it.
    return (f"struct porter_probe_functor {{\n  template <typename T>\n"
            f"  inline auto operator()({args}) {{\n    return (\n{expression.strip()}\n    );\n  }}\n}};\n"
            f"inline void porter_probe() {{ (void)porter_probe_functor()({call}); }}\n")


def _example(params, complex_: bool) -> str:
    """An expression in the functor's own argument names (any number of them: a scalar op's
    scalars are arguments too)."""
    first = params[0]
    if complex_:
        return f"float2({first}.x, -{first}.y)"
    if len(params) == 1:
        return f"{first} < 0 ? -{first} : {first}"
    return f"{first} > {params[1]} ? {first} : {params[1]}"


def check_kernel_file(path: str, original: str | None, planned: str, root, kernels) -> None:
    """Refuse (exit 1) a planned kernel file that does not build, with the compiler's first
    error at its line in the planned text."""
    from porter.emulate.probe import probe_source

    if planned.count(SKELETON_MARK) > (original or "").count(SKELETON_MARK):
        # the edit adds porter's skeleton, whose static_assert stops the build until its body
        # is written (and whose placeholder return need not be the registered output type):
        # the port is incomplete, which its own check says (exit 1, naming the option that
        # writes the body), not a kernel file porter's edit broke
        return
    error = probe_source(planned, path, root, kernels)
    if error is None:
        return
    before = probe_source(original, path, root, ()) if original is not None else None
    if before is not None and _a_mac_rejects(original, path, root):
        # the file is already broken in a way a Mac's compiler rejects too (a syntax error):
        # every kernel in it fails there, the port included, so nothing can be proven
        raise BuildRefused(f"{path} does not build before porter's edit: {before}; a Mac "
                           "cannot build the port into it either; nothing was written",
                           hint="fix that error first (porter emulate check lists it), or pass "
                                "--no-build to write the port unbuilt")
    if before is not None:
        # the file did not pass the probe before porter's edit either: judge the edit by what
        # it adds to a full, quarantining build (or, where the file cannot be built at all, by
        # whether its first error is a new one)
        try:
            error = _new_in_full_build(path, original, planned, root, kernels)
        except (PorterError, OSError):
            if _message(error) == _message(before):
                return
        if error is None:
            return
    raise BuildRefused(f"the planned {path} does not build: {error}; nothing was written", error=error,
                       hint="porter's edit would stop every kernel of the file compiling on a Mac")


def check_ported_kernel_file(path: str, text: str, root, kernels, op: str) -> None:
    """An op whose port exists (an editing command has nothing to plan): refuse (exit 1) when
    its kernel file no longer builds in a way a Mac's compiler rejects too, e.g. a `;` lost in
    another functor of the file after the port. The probe porter runs before writing, on the
    file as it is (cached by content hash: a rerun of an unchanged file costs ~1 ms). An error
    only the emulation has (a construct it does not model) is not the port's: no word."""
    from porter.emulate.probe import probe_source

    error = probe_source(text, path, root, kernels)
    if error is None or not (_a_mac_rejects(text, path, root) or _WRONG_OUTPUT_RE.search(error)):
        return
    raise BuildRefused(f"the port of {op} exists but its kernel file {path} does not build: "
                       f"{error}; on a Mac {op} (and every kernel of the file) fails to compile",
                       hint="fix that error (porter emulate check lists it), or pass --no-build "
                            "to skip this check")


# probe_error's words for a registration whose output type is not the functor's: the
# registration macro's static_assert, which a Mac's compiler fails as well
_WRONG_OUTPUT_RE = re.compile(r": \w+" + re.escape(REGISTERED_AS) + r"\S+ for input \S+, but \w+ returns ")


def _a_mac_rejects(text: str, path, root) -> bool:
    """Whether a Mac's compiler rejects the file too: the Metal front end's verdict (porter.
    emulate.frontend), not the words of g++'s error, which also refuses constructs a Mac builds
    and the emulation does not model (review 38's M01, M03: a vector `?:`, a short vector
    initializer list were "on a Mac ... fails to compile")."""
    from porter.emulate import dialect

    return bool(dialect.errors_by_version(dialect.views(text, path, root)))


def _message(error: str) -> str:
    """An error without its `file:line: ` (the same error moves when porter adds lines)."""
    return re.sub(r"^[^:]*:\d+: ", "", error)


def _new_in_full_build(path, original, planned, root, kernels) -> str | None:
    """What the planned file's quarantining build drops that the original's does not."""
    from porter.emulate.build import build_source

    before = build_source(original, path, root, strict=False)
    after = build_source(planned, path, root, strict=False)
    old = set(before.quarantined) | {d.split(": ", 1)[-1] for d in before.dropped}
    for key, reason in after.quarantined.items():
        if key not in old:
            return reason.split(": ", 1)[-1]
    for dropped in after.dropped:
        if dropped.split(": ", 1)[-1] not in old:
            return dropped
    unbuilt = [r for r in after.registrations if r.name in kernels and not r.built]
    if unbuilt:
        return after.reason(unbuilt[0]) or f"{unbuilt[0].name} for {unbuilt[0].in_type} is not built"
    return None
