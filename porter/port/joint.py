"""Two ports in one command: an op whose shared CPU/CUDA function runs another op's stub for some
dtypes (sgn_out: sign_stub for real inputs, sgn_stub for complex ones) is ported together with
that op when it has no MPS kernel yet, as upstream moved sgn and sign to Metal together.

The other op's port is planned first, on the checkout; the op's own is planned on the checkout as
those edits leave it (`Overlay`, read in memory, nothing written); the two become one ChangeSet
against the files on disk, whose dry run lists every file either port edits.
"""

from __future__ import annotations

import fnmatch

from porter.apply.changes import ChangeSet
from porter.errors import PorterError
from porter.source import checkout as co


class Overlay(co.Checkout):
    """The checkout as it will be once `changes` are written: a planned file's text, or the
    checkout's; created files are found by glob too."""

    def __init__(self, base: co.Checkout, changes: ChangeSet):
        super().__init__(base.root)
        self.base = base
        self.planned = changes

    def exists(self, rel: str) -> bool:
        return rel in self.planned.changes or self.base.exists(rel)

    def read(self, rel: str) -> str:
        change = self.planned.changes.get(rel)
        return change.new if change is not None else self.base.read(rel)

    def glob(self, rel_dir: str, pattern: str) -> list[str]:
        found = set(self.base.glob(rel_dir, pattern))
        for rel in self.planned.changes:
            folder, _, name = rel.rpartition("/")
            if folder == rel_dir.rstrip("/") and fnmatch.fnmatch(name, pattern):
                found.add(rel)
        return sorted(found)


def with_prerequisite(checkout: co.Checkout, op: str, first: str, refusal: PorterError,
                      plan_first, plan_op):
    """`op`'s plan with `first`'s port before it, in one ChangeSet. `plan_first(checkout)` and
    `plan_op(checkout)` plan each port as its own command would. Raises `refusal`, with why,
    where `first` cannot be ported completely."""
    try:
        prior = plan_first(checkout)
    except PorterError as why:
        raise PorterError(f"{refusal.message}; porter would port {first} with it, but {first} is "
                          f"refused: {why.message}", path=refusal.path, line=refusal.line,
                          hint=refusal.hint) from None
    if prior.gaps or prior.wrong:
        missing = "; ".join([g.what for g in prior.gaps] + [w.message for w in prior.wrong])
        raise PorterError(f"{refusal.message}; porter would port {first} with it, but {first}'s port "
                          f"is incomplete ({missing})", path=refusal.path, line=refusal.line,
                          hint=refusal.hint)
    plan = plan_op(Overlay(checkout, prior.changes))
    merged = ChangeSet(checkout.root)
    for source in (prior.changes, plan.changes):
        for path, change in source.changes.items():
            old = checkout.read(path) if checkout.exists(path) else None
            merged.set(path, old, change.new)
        for path in source.last:
            merged.apply_last(path)
    plan.changes = merged
    plan.notes = ([f"ported {first} too, first: {op}'s shared function runs {first}'s kernel for the "
                   f"dtypes its own does not take (`porter status {first}`)"] + prior.notes + plan.notes)
    plan.removed = prior.removed + plan.removed
    return plan
