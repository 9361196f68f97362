"""One verdict (porter.harness.verdict_scope): plain `porter test`, `--watch`, the port
commands and their rerun all run upstream's samples, the reference inputs and the shapes;
`--samples-only` alone runs upstream's samples. Wrong on purpose: heaviside's functor ignores
`b` at zero for floating types (`T(1) / T(2) == T(0)` holds for integers only), which
upstream's float samples never reach (random values are never exactly 0)."""

from __future__ import annotations

import shutil

import pytest

from porter.source.checkout import KERNELS
from tests.porter_run import porter

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
RIGHT = "    return a == 0 ? b : static_cast<T>(a > 0);\n"
WRONG_AT_ZERO_FOR_FLOATS = "    return a == 0 && T(1) / T(2) == T(0) ? b : static_cast<T>(a > 0);\n"


@needs_compiler
@pytest.mark.slow
def test_a_functor_wrong_at_zero_for_floats_is_red_in_every_command_but_samples_only(real_root):
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    text = metal.read_text()
    assert text.count(RIGHT) == 1
    metal.write_text(text.replace(RIGHT, WRONG_AT_ZERO_FOR_FLOATS))

    plain = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert plain.code == 1, plain.out
    assert "rows: upstream's samples, the reference inputs and the shapes" in plain.out
    assert "FAIL float32" in plain.out and "--reference-inputs" in plain.out

    # upstream's samples alone pass it: the reason the full verdict is the default
    alone = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32",
                   "--samples-only", root=real_root)
    assert alone.code == 0 and "rows: upstream's samples only (--samples-only" in alone.out, alone.out
    assert "reference inputs:" not in alone.out

    # a rerun of the port command re-tests the files it wrote before: red, exit 1
    again = porter("new-op", "heaviside", "--test", root=real_root)
    assert again.code == 1, again.out
    assert again.out.startswith("porter new-op heaviside: every file is already as planned; testing the port\n")
    assert "nothing to do" not in again.out
    assert "the port was written before and is red: heaviside fails its test on emulate" in again.err


@pytest.mark.parametrize("flag, why", [
    ("--prune-xfails", "it edits the expectation lists the loop watches"),
    ("--upstream", "it runs the checkout's test_mps.py on a Mac"),
])
def test_watch_refuses_what_it_cannot_honour(mini_root, flag, why):
    """Before: --watch dropped options silently (--reference-inputs, --shapes, --macos,
    --junit, --summary); now it runs what the command runs without it, or exits 2 naming
    the option."""
    result = porter("test", "heaviside", "--device", "emulate", "--watch", flag, root=mini_root)
    assert result.code == 2, (result.out, result.err)
    assert f"--watch cannot honour {flag}: {why}" in result.err
    assert len(result.err.strip().splitlines()) <= 2          # the error and its hint


def test_watch_and_the_plain_run_are_given_the_same_options():
    import argparse

    from porter.commands import test as command
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    for extra in ([], ["--macos", "14.4", "--junit", "r.xml", "--summary", "s.md"], ["--samples-only"],
                  ["--reference-inputs", "--sample", "3"]):
        plain = command.options(parser.parse_args(["heaviside", *extra]))
        watched = command.options(parser.parse_args(["heaviside", "--watch", *extra]))
        assert plain == watched, extra
    full = command.options(parser.parse_args(["heaviside"]))
    assert (full["reference_inputs"], full["shapes"]) == (True, True)
    alone = command.options(parser.parse_args(["heaviside", "--samples-only"]))
    assert (alone["reference_inputs"], alone["shapes"]) == (False, False)
    # --sample N: one kind of row, the one it counts
    one = command.options(parser.parse_args(["heaviside", "--sample", "2"]))
    assert (one["reference_inputs"], one["shapes"]) == (False, False)


@needs_compiler
@pytest.mark.slow
def test_an_answer_metal_leaves_undefined_is_held_both_ways(real_root):
    """Review 15's N13: a NaN into fast::fmax has no defined answer (fast math, MSL §6.5), and
    porter ran IEEE's fmax alone: green, whatever a Mac answers. Both readings must pass now;
    the twin through metal::fmax (defined on a NaN) stays green."""
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    text = metal.read_text()
    planted = "    return a == 0 ? b : static_cast<T>(!(%s(float(a), 0.0f) <= 0));\n"
    metal.write_text(text.replace(RIGHT, planted % "fast::fmax"))
    red = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert red.code == 1, red.out
    assert "FAIL float32" in red.out and "with Metal's undefined answer read as NaN " \
        "(fast::min/max/fmin/fmax/fmin3/fmax3/clamp got a NaN" in red.out
    metal.write_text(text.replace(RIGHT, planted % "metal::fmax"))
    twin = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert twin.code == 0, twin.out


@needs_compiler
@pytest.mark.slow
def test_the_cached_run_says_what_the_op_db_run_says_of_a_wrong_body(real_root):
    """The same verdict, failures, tables and notes whichever way the run gets its samples: a
    wrong functor, run through op_db (--no-cache, which records nothing) and from the cache.
    The subnormal-input note counted an element again for each comparison of its sample (the
    contracted rerun, the float32 opmath check): 24 vs 12 elements for float32, 16 vs 8 for
    bfloat16, depending on the path."""
    import re
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    metal.write_text(metal.read_text().replace(RIGHT, RIGHT.replace("a > 0", "a < 0")))
    args = ("test", "heaviside", "--device", "emulate", "--dtype", "float32", "--dtype", "bfloat16")
    first = porter(*args, root=real_root)              # records the cache
    fresh = porter(*args, "--no-cache", root=real_root)
    cached = porter(*args, root=real_root)
    assert first.code == fresh.code == cached.code == 1
    assert "samples and references cached" in cached.out.splitlines()[0]

    def body(out):      # the header line names the path; the seconds column is timing
        return [re.sub(r"\s+[\d.]+$", "", line) for line in out.splitlines()[1:]]
    assert body(fresh.out) == body(cached.out)
    notes = re.findall(r"note (\w+): (\d+) element\(s\) of subnormal", cached.out)
    assert sorted(notes) == [("bfloat16", "8"), ("float32", "12")], notes


NOT_PROVEN_BRANCH = ("#ifdef SIG_ATOMIC_MAX\n" + RIGHT + "#else\n"
                     + RIGHT.replace("a > 0", "a < 0") + "#endif\n")


@needs_compiler
@pytest.mark.slow
def test_a_port_red_only_where_porter_cannot_tell_says_not_proven_not_red(real_root):
    """The rerun's last line tells a port porter cannot judge (a branch on a macro g++'s
    library defines and Metal's does not) from one that fails: both exit 1, neither is green,
    and the summary counts the dtypes that are only "not proven"."""
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    metal.write_text(metal.read_text().replace(RIGHT, NOT_PROVEN_BRANCH))
    again = porter("new-op", "heaviside", "--test", root=real_root)
    assert again.code == 1, again.out
    assert "summary: 0 pass, 27 fail (27 not proven), 0 xfail" in again.out
    assert ("the port was written before and is not proven, so not green: whether heaviside "
            "passes on a Mac is not known on emulate") in again.err
    assert "is red" not in again.err
