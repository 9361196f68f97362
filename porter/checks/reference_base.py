"""Whether an op's CPU reference is this checkout's: the ops whose CPU kernel changed since the
base the installed torch stands for (`porter test --changed-since REF`, and by default the
installed torch's own commit or `porter pr`'s base), as "op: why" lines or {op: why}."""

from __future__ import annotations

from porter.errors import PorterError
from porter.source.checkout import resolve_checkout


def reference_gaps(root, ref: str, ops: list[str]) -> list[str]:
    """"op: why" for each op whose CPU reference the change since `ref` leaves unproven."""
    from porter.checks import changed, cpu_reference
    checkout = resolve_checkout(root)
    if checkout is None:
        raise PorterError("--changed-since needs the checkout's git repository",
                          hint="run it inside the checkout, or pass --root DIR")
    changes = changed.since(checkout.root, ref)
    old = changed.OldCheckout(checkout.root, changes)
    gaps = cpu_reference.not_this_checkouts(checkout, changes, ops, old.read)
    return [f"{op}: {why}" for op, why in gaps.items()]


def default_reference_gaps(root, ops: list[str]) -> list[str]:
    """`op: why` of default_reference_gap_map."""
    return [f"{op}: {why}" for op, why in default_reference_gap_map(root, ops).items()]


def default_reference_gap_map(root, ops: list[str]) -> dict[str, str]:
    """reference_gaps since the commit the installed torch was built from, where the repository
    holds it, else since the base `porter pr` uses (the merge base of HEAD with origin/main,
    upstream/main, main, origin/master or master): a branch, or uncommitted work, that edits an
    op's CPU kernel leaves its reference unproven even without --changed-since, since the
    installed torch's CPU is at best the base's. None of those refs, or no git: [] (nothing
    to compare with; the reference is the installed torch's, as ever): {op: why}."""
    from porter.checks import changed, cpu_reference
    from porter.source.git_base import default_base, wheel_commit
    checkout = resolve_checkout(root)
    if checkout is None:
        return {}
    # the installed torch's own commit, where the repository has it: what the reference runs
    wheel = wheel_commit(checkout.root)
    found = ("the installed torch's commit", wheel) if wheel else default_base(checkout.root)
    if found is None:
        return {}
    import copy
    ref, base = found
    changes = changed.since(checkout.root, base)
    old = changed.OldCheckout(checkout.root, copy.copy(changes))     # reads the base commit
    # the messages name the ref the base came from
    changes.ref = f"{ref} (merge base {base[:12]})"
    return cpu_reference.not_this_checkouts(checkout, changes, ops, old.read)
