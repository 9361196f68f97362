"""The one way a command writes a planned ChangeSet: not on a dry run, and never over
uncommitted work unless the user allows it."""

from __future__ import annotations

from porter.apply.changes import ChangeSet


def apply_unless_dry(changes: ChangeSet, dry_run: bool, allow_dirty: bool = False,
                     flag: str = "--allow-dirty") -> list[str] | None:
    """Write the changes unless this is a dry run. Files about to be written must have no
    uncommitted changes in git unless `allow_dirty`, which the command's option `flag` sets
    (porter.apply.vcs says why)."""
    if dry_run:
        return None
    if changes and not allow_dirty:
        from porter.apply.vcs import refuse_dirty
        refuse_dirty(changes.root, [c.path for c in changes.pending], flag)
    written = changes.apply()      # with nothing pending: only sweeps a killed run's temp files
    return written or None
