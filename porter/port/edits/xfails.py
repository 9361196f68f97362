"""Remove an op's keys from the UNIMPLEMENTED xfail dicts of `common_mps.py`."""

from __future__ import annotations

from porter.source import xfail_lists


def remove_unimplemented(text: str, path: str, keys: tuple[str, ...],
                         keep_dtypes=frozenset()) -> tuple[str, list[xfail_lists.XfailEntry]]:
    """(new text, entries that still name the op: reported, never removed).

    An UNIMPLEMENTED entry that names a dtype of `keep_dtypes` (one the port gives no kernel,
    because the CPU reference refuses it) stays: that dtype's MPS test still fails."""
    all_entries = xfail_lists.entries(text, path)
    wanted = set(keys)

    def stays(e) -> bool:
        return e.dict_name not in xfail_lists.UNIMPLEMENTED or bool(set(e.dtypes or ()) & keep_dtypes)

    doomed = [e for e in all_entries if e.key in wanted and not stays(e)]
    others = [e for e in all_entries if e.key in wanted and stays(e)]
    return xfail_lists.remove_keys(text, doomed), others
