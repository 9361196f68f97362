"""What "green" means: the one definition every command asks for.

A port is green when every dtype the MPS test sends passes on upstream's OpInfo samples, on
the OpInfo's reference inputs with porter's edge values (±0, ±inf, NaN, subnormals, each
dtype's limits), and on porter's layouts (`porter.harness.shapes`: transposed, sliced,
broadcast, 0-dim, empty, large). `porter test` (with and without `--watch`), the port
commands' closing test (`new-op`, `migrate-from-mpsgraph`, a rerun of either), `porter pr`,
`porter candidates --verify` and the workflow `porter ci init` writes all run `FULL`.

`SAMPLES_ONLY` is upstream's samples alone, what `test_output_match` sends: only `porter test
--samples-only` asks for it (to compare with upstream's test), and its report says that it is
not the full verdict. Before this module the commands meant three things: the port commands
ran samples + reference inputs, `porter test` samples only, `porter pr` all three, so a
heaviside functor wrong at zero passed `porter test` and failed the others.
"""

from __future__ import annotations

from typing import NamedTuple


class Scope(NamedTuple):
    reference_inputs: bool      # the OpInfo's reference_inputs and porter's edge values, own rows
    shapes: bool                # porter.harness.shapes' layouts, own rows
    words: str                  # what the report's header says was run

    @property
    def full(self) -> bool:
        return self.reference_inputs and self.shapes


FULL = Scope(True, True, "upstream's samples, the reference inputs and the shapes")
SAMPLES_ONLY = Scope(False, False, "upstream's samples only (--samples-only: not porter's "
                                   "verdict, which adds the reference inputs and the shapes)")


def of(samples_only: bool = False) -> Scope:
    """The verdict a command runs: FULL unless the user asked for upstream's samples alone."""
    return SAMPLES_ONLY if samples_only else FULL


def words(reference_inputs: bool, shapes: bool) -> str:
    """The header's words for a run of these rows."""
    for scope in (FULL, SAMPLES_ONLY):
        if (scope.reference_inputs, scope.shapes) == (reference_inputs, shapes):
            return scope.words
    rows = ["upstream's samples"] + (["the reference inputs"] if reference_inputs else []) + \
        (["the shapes"] if shapes else [])
    return " and ".join(rows) + " (not the full verdict)"
