"""Narrow or remove expectation entries that xpassed (`--prune-xfails`, `audit-xfails --prune`).

Rules, per entry of `mps_ops_modifier`'s xfail dicts:
- a `None` entry becomes the list of dtypes that did not pass (still failing, or not tested
  in this run); it is removed when that list is empty;
- a dtype-list entry loses the dtypes that passed; it is removed when empty;
- never add or widen. `MACOS_BEFORE_*` entries (only meaningful on old macOS), a missing
  `SUPPORTED_COMPLEX_OPS` key (pruning would mean adding one) and OpInfo DecorateInfos are
  reported, not edited.
Edits are text splices at the entry's ast offsets; every other byte of the file is kept.
Torch-free: works on results as dicts (from `--json` files) or OpResult objects.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from porter.apply.changes import ChangeSet
from porter.errors import PorterError
from porter.harness import mps_expectations as expmod
from porter.harness.verdicts import XPASS


@dataclass
class PrunePlan:
    actions: list[str] = field(default_factory=list)    # what the edit does, one line each
    reported: list[str] = field(default_factory=list)   # stale expectations left for a human
    new_text: str | None = None


def _get(obj, name):
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def plan(results, exp: expmod.Expectations) -> PrunePlan:
    """Compute the edit of `exp.text` that removes what the results prove stale."""
    out = PrunePlan()
    edits: list[tuple[int, int, str, str]] = []   # (start, end, replacement, action)
    expected_after: dict[tuple[str, str], tuple[str, ...] | None] = {}
    for result in results:
        key = _get(result, "key")
        dtypes = _get(result, "dtypes")
        supported = list(_get(result, "supported") or [_get(d, "dtype") for d in dtypes])
        xpassed_by: dict[str, set[str]] = {}
        for d in dtypes:
            if _get(d, "outcome") != XPASS:
                continue
            for source in _get(d, "expected_by"):
                xpassed_by.setdefault(source, set()).add(_get(d, "dtype"))
                if not any(source == e.where for e in exp.for_key(key)):
                    out.reported.append(f"{_get(result, 'op')} {_get(d, 'dtype')}: xpass under "
                                        f"{source}; not edited")
        for entry in exp.for_key(key):
            passing = xpassed_by.get(entry.where)
            if not passing or entry.kind == expmod.KIND_SKIP:
                continue
            if entry.kind == expmod.KIND_XFAIL_OLD_MACOS:
                out.reported.append(f"{entry.where}: passes on this machine; MACOS_BEFORE_* "
                                    "entries are only pruned on that macOS; not edited")
                continue
            base = supported if entry.dtypes is None else list(entry.dtypes)
            remaining = [d for d in base if d not in passing]
            if entry.dtypes is not None and len(remaining) == len(entry.dtypes):
                continue
            if remaining:
                start, end = exp.offset(entry.value_at), exp.offset(entry.value_end_at)
                new = _narrowed(exp.text[start:end], entry.dtypes, remaining)
                action = f"{entry.where}: narrowed to [{', '.join(remaining)}]"
            else:
                start, end = _removal_span(exp, entry)
                new = ""
                action = f"{entry.where}: removed"
            edits.append((start, end, new, action))
            expected_after[(entry.dict_name, entry.key)] = tuple(remaining) if remaining else None
    if not edits:
        return out
    edits.sort()
    for (s1, e1, *_), (s2, *_) in zip(edits, edits[1:]):
        if s2 < e1:
            raise PorterError("overlapping expectation edits; nothing was written", path=exp.path)
    text = exp.text
    for start, end, new, action in reversed(edits):
        text = text[:start] + new + text[end:]
    out.actions = [a for *_, a in edits]
    _validate(text, exp, expected_after)
    out.new_text = text
    return out


def add_to_changeset(changes: ChangeSet, exp: expmod.Expectations, pruned: PrunePlan) -> None:
    if pruned.new_text is not None and exp.path is not None:
        changes.set(exp.path, exp.text, pruned.new_text)


def _narrowed(value_src: str, old: tuple[str, ...] | None, remaining: list[str]) -> str:
    """The new value text: kept elements in their original spelling, upstream style."""
    if old is None:
        return "[" + ", ".join(f"torch.{d}" for d in remaining) + "]"
    node = ast.parse(value_src.strip(), mode="eval").body
    kept = []
    for elt in node.elts:
        name = expmod.canonical_dtype(elt.attr)
        if name in remaining:
            kept.append(ast.get_source_segment(value_src.strip(), elt))
    return "[" + ", ".join(kept) + "]"


def _removal_span(exp: expmod.Expectations, entry: expmod.Entry) -> tuple[int, int]:
    """The entry `"key": value,` with its comma; whole lines when it has them to itself."""
    text = exp.text
    start, end = exp.offset(entry.key_at), exp.offset(entry.value_end_at)
    i = end
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] == ",":
        i += 1
    while i < len(text) and text[i] in " \t":
        i += 1
    line_start = text.rfind("\n", 0, start) + 1
    own_line_start = text[line_start:start].strip() == ""
    if own_line_start and (i >= len(text) or text[i] in "\r\n#"):
        eol = text.find("\n", i)
        return line_start, len(text) if eol < 0 else eol + 1
    if i >= len(text) or text[i] in "\r\n":
        # last entry of a shared line: drop the blank run before it too
        while start > line_start and text[start - 1] in " \t":
            start -= 1
    return start, i


def _validate(text: str, exp: expmod.Expectations, expected_after) -> None:
    new = expmod.parse(text, exp.path or "common_mps.py")
    if new is None:
        raise PorterError("the pruned file lost mps_ops_modifier; nothing was written", path=exp.path)
    got = {(e.dict_name, e.key): e.dtypes for e in new.entries}
    for (dict_name, key), dtypes in expected_after.items():
        if dtypes is None and (dict_name, key) in got:
            raise PorterError(f"{dict_name}[{key!r}] still present after pruning", path=exp.path)
        if dtypes is not None and got.get((dict_name, key)) != dtypes:
            raise PorterError(f"{dict_name}[{key!r}] has {got.get((dict_name, key))} after "
                              f"pruning, expected {dtypes}", path=exp.path)
    before = {(e.dict_name, e.key) for e in exp.entries} - set(expected_after)
    if before - set(got):
        raise PorterError("pruning would remove an unrelated entry; nothing was written",
                          path=exp.path)
