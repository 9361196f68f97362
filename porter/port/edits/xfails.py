"""Remove an op's keys from the UNIMPLEMENTED xfail dicts of `common_mps.py`."""

from __future__ import annotations

from porter.source import xfail_lists


def remove_unimplemented(text: str, path: str, keys: tuple[str, ...]) -> tuple[str, list[xfail_lists.XfailEntry]]:
    """(new text, entries of other dicts that still name the op: reported, never removed)."""
    all_entries = xfail_lists.entries(text, path)
    wanted = set(keys)
    doomed = [e for e in all_entries if e.key in wanted and e.dict_name in xfail_lists.UNIMPLEMENTED]
    others = [e for e in all_entries if e.key in wanted and e.dict_name not in xfail_lists.UNIMPLEMENTED]
    return xfail_lists.remove_keys(text, doomed), others
