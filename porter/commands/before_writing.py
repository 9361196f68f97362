"""Is a planned port done? The checks an editing command runs between planning and writing.

1. `--body`/`--complex-body` compile as one Metal expression (else exit 2, bad input);
2. the registrations porter planned give each dtype the output type the op produces (else
   exit 1: a Mac would reject the file or compute another dtype);
3. each planned `.metal` file builds (else exit 1, the compiler's first error); with nothing
   planned, the op's existing kernel file builds (else exit 1: the port exists, its file fails);
4. every dtype the MPS test sends has a kernel and the functor has a body: otherwise the port
   is incomplete (exit 1; written only with --allow-incomplete, naming the tests that fail).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

from porter import exit_codes
from porter.emulate import build_check
from porter.port import completeness
from porter.port.functor import SKELETON, complex_only
from porter.errors import PorterError


class WrongRegistration(PorterError):
    exit_code = exit_codes.FAILED


class IncompleteMigration(PorterError):
    exit_code = exit_codes.FAILED


def _skeleton_gap(gap: completeness.Gap) -> bool:
    """The gap of a functor without a body (porter.port.plan), whichever flag supplies it."""
    return gap.what.startswith("the body of ")


def params_of(spec) -> tuple[str, ...]:
    from porter.port.functor import functor_params

    return functor_params(spec)


class Outcome(NamedTuple):
    incomplete: list[str]        # each gap and the flag that supplies it
    notes: list[str]


def verify(command: str, checkout, plan, *, body: str | None, complex_body: str | None,
           build: bool = True) -> Outcome:
    spec = plan.spec
    notes: list[str] = []
    if build:
        build_check.require_compiler(command)
        if not plan.changes and checkout.exists(spec.metal_path):
            # nothing to write, so nothing planned is built: the port exists, and its kernel
            # file must still build for "nothing to do" to be true
            build_check.check_ported_kernel_file(spec.metal_path, checkout.read(spec.metal_path),
                                                 checkout.root, (spec.kernel,), spec.op)
    elif plan.changes:
        notes.append("WARNING: not built (--no-build): the planned .metal files were not compiled, "
                     "so porter cannot say they build on a Mac")
    functor = plan.functor
    if build and functor is not None:
        params = params_of(spec)
        metal_text = _with_planned_headers(plan.changes.current(spec.metal_path, checkout.read), plan)
        if body is not None:
            build_check.check_expression("--body", body, params, metal_text, checkout.root, spec.op)
        if complex_body is not None and functor.complex:
            build_check.check_expression("--complex-body", complex_body, params, metal_text,
                                         checkout.root, spec.op, complex_=True)
    if plan.wrong:
        raise WrongRegistration(
            f"porter would write wrong registrations for {spec.op}: "
            f"{'; '.join(w.message for w in plan.wrong)}; nothing was written",
            path=spec.metal_path, hint="porter cannot write this op's registrations yet: write "
            "the functor and its registrations by hand")
    if build:
        with _planned_c10(checkout, plan) as build_root:
            _check_planned_kernel_files(checkout, plan, spec, functor, build_root)
    incomplete = [f"{g.what}: {g.flag}" for g in plan.gaps]
    if command == "migrate-from-mpsgraph" and functor is not None and functor.origin == SKELETON:
        # --allow-incomplete does not stretch this far: the MPSGraph code works, a skeleton does not
        raise IncompleteMigration(
            f"migrate-from-mpsgraph {spec.op} would replace a working MPSGraph implementation by a "
            f"functor without a body ({functor.detail}); nothing was written",
            hint=f"pass {'--complex-body' if complex_only(spec) else '--body'} EXPR (in "
                 f"{' and '.join(params_of(spec))}) with the Metal expression")
    if plan.gaps:
        failing: list[str] = []
        skeleton = any(_skeleton_gap(g) for g in plan.gaps)
        if skeleton:
            failing.append(f"every kernel of {spec.metal_path} (the skeleton's static_assert "
                           "stops the file compiling)")
        unbuilt = False
        for gap in plan.gaps:
            if gap.dtypes and not skeleton:
                failing += completeness.mac_tests(spec, gap.dtypes)
            elif not gap.dtypes and not _skeleton_gap(gap):
                # what the host code needs and the checkout lacks (a library overload): no
                # test of the op runs, the build stops first
                failing.append(f"the MPS build ({gap.what.split(' (', 1)[0]} is missing)")
                unbuilt = True
        if skeleton or unbuilt:
            failing += completeness.mac_tests(spec, ())
        notes.append("WARNING: incomplete port; on a Mac these fail: " + "; ".join(failing))
    return Outcome(incomplete, notes)


def _check_planned_kernel_files(checkout, plan, spec, functor, build_root) -> None:
    for change in plan.changes.pending:
        kernel = plan.new_kernels.get(change.path)
        if not change.path.endswith(".metal"):
            continue
        skeleton = functor is not None and functor.origin == SKELETON
        # a skeleton fails on purpose: it is a gap (below), the rest of the file must build
        only = () if (kernel is None or skeleton) else (kernel,)
        try:
            build_check.check_kernel_file(change.path, change.old,
                                          _with_planned_headers(change.new, plan), build_root, only)
        except build_check.BuildRefused as refused:
            added = getattr(plan, "added_dtypes", ())
            if not added or kernel != spec.kernel:
                raise
            # the registrations porter added for dtypes the functor never took
            error = refused.error or refused.message.removesuffix("; nothing was written")
            raise build_check.BuildRefused(
                f"{spec.kernel}_functor has no kernel for {', '.join(added)}, which {spec.op}'s "
                f"MPS test sends, and does not build for them ({error}); nothing was written",
                path=spec.metal_path,
                hint=f"give {spec.kernel}_functor an overload for them and register them by "
                     "hand, or xfail those dtypes in common_mps.py") from None


@contextmanager
def _planned_c10(checkout, plan):
    """The root the planned kernel files build against: the checkout's, or where the plan adds
    a helper to c10/metal (porter.port.helpers), a scratch one whose c10/metal has it and whose
    aten/src is the checkout's."""
    import shutil
    from pathlib import Path

    from porter.runtime.scratch import reused_directory

    planned = [c for c in plan.changes.pending if c.path.startswith("c10/")]
    if not planned:
        yield checkout.root
        return
    # a path that repeats from run to run: the preludes built against it serve the next run
    with reused_directory("c10", checkout.root) as root:
        shutil.copytree(Path(checkout.root) / "c10", root / "c10", symlinks=True)
        for change in planned:
            (root / change.path).write_text(change.new, encoding="utf-8")
        (root / "aten").mkdir()
        (root / "aten" / "src").symlink_to(Path(checkout.root) / "aten" / "src", target_is_directory=True)
        yield root


def _with_planned_headers(text: str, plan) -> str:
    """`text` with each `#include` of a kernel header porter plans to write or change (a params
    struct in ActivationKernel.h) replaced by its planned text, which is not on disk yet; the
    replacement keeps one line, so the compiler's line numbers stay those of the planned file."""
    import re

    for change in plan.changes.pending:
        if not change.path.endswith(".h") or change.path.startswith("c10/"):
            continue        # c10/metal changes build from a scratch root (_planned_c10)
        include = change.path.split("aten/src/", 1)[-1]
        lines = (line.split("//", 1)[0] for line in change.new.splitlines())
        body = " ".join(line for line in lines if line.strip() and not line.startswith("#pragma once"))
        text = re.sub(rf"^#include <{re.escape(include)}>$", lambda _: body, text, flags=re.M)
    return text
