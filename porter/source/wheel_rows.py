"""Whether an op's `native_functions.yaml` entries in the checkout are the installed torch's.

The emulator's verdict runs the installed torch: its CPU kernel is the reference, its op
database sends the samples, its Python API (`torch.heaviside`) is what the OpInfo calls. Those
stand for the checkout only where the checkout declares the op as the wheel does. porter
models one change to an entry, the one a port makes: MPS in the dispatch rows. Anything else
(review 17's Y05: `structured_inherits` dropped, so the meta class lacks the TensorIterator
helpers and the C++ does not build; Y11: `variants: method`, so `torch.heaviside` is gone and
test_mps.py cannot import) is a row a Mac builds and the wheel does not: not proven here.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from porter.source import native_yaml

# dispatch keys whose kernel decides what runs on MPS or what the CPU reference computes:
# the CPU kernel, and a composite one (which runs instead of any backend kernel). Other
# backends' rows (CUDA, XPU, MTIA, sparse, nested) say nothing of either.
_KEYS = frozenset({"CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                   "CompositeExplicitAutogradNonFunctional"})


@lru_cache(maxsize=1)
def _wheel_text() -> str | None:
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = (Path(next(iter(spec.submodule_search_locations))) / "packaged" / "ATen" / "native"
            / "native_functions.yaml")
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _shape(entry: native_yaml.Entry) -> dict[str, str]:
    """What of an entry must match: its schema, its fields (dispatch aside), and the kernel of
    each dispatch key in _KEYS."""
    out = {"func": " ".join(entry.schema.split())}
    out.update({k: " ".join(v.split()) for k, v in entry.fields.items() if k != "dispatch"})
    for row in entry.dispatch:
        for key in set(row.keys) & _KEYS:
            out[f"dispatch {key}"] = row.kernel
    return out


def unlike_the_wheel(checkout_text: str, names: set[str]) -> tuple[int, str] | None:
    """(line, what differs) of the first entry named in `names` (base names: "heaviside",
    "heaviside_") that the checkout declares otherwise than the installed torch, or None
    (the same, or no wheel yaml to compare with)."""
    wheel_text = _wheel_text()
    if wheel_text is None:
        return None
    mine = native_yaml.entries_named(checkout_text, names)
    theirs = {e.full_name: e for e in native_yaml.entries_named(wheel_text, names)}
    for entry in mine:
        other = theirs.pop(entry.full_name, None)
        if other is None:
            return entry.lineno, f"{entry.full_name} is not in the installed torch's yaml"
        differs = _first_difference(entry, other)
        if differs:
            return entry.lineno, differs
    # of the wheel's entries the checkout lacks, the function the OpInfo calls (`heaviside`,
    # no overload), where no other functional overload of the name is left: without it a Mac's
    # torch has no such call. An in-place or other
    # overload the checkout lacks is not what test_output_match calls (a miniature checkout
    # leaves many out); one another entry delegates to fails torchgen (yaml_verdict)
    gone = next((e for e in theirs.values() if not e.overload and not e.name.endswith("_")), None)
    # another functional overload of the name keeps the Python function (the miniature's
    # round.decimals serves torch.round(x, decimals=0), which its OpInfos call)
    kept = any(e.name == (gone.name if gone else None) and not e.is_out for e in mine)
    if gone is not None and not kept:
        first = mine[0].lineno if mine else 1
        return first, f"{gone.full_name}, in the installed torch's yaml, is not in the checkout's"
    return None


def _first_difference(entry: native_yaml.Entry, other: native_yaml.Entry) -> str | None:
    """How the checkout's `entry` first differs from the wheel's `other` (_shape), or None."""
    a, b = _shape(entry), _shape(other)
    key = next((k for k in [*a, *(k for k in b if k not in a)] if a.get(k) != b.get(k)), None)
    if key is None:
        return None
    return (f"{entry.full_name}'s `{key}` is {_said(a.get(key))} where the installed torch's "
            f"is {_said(b.get(key))}")


def _said(value: str | None) -> str:
    return "absent" if value is None else f"`{value}`"


def all_unlike(checkout_text: str) -> dict:
    """What of the whole file the checkout declares otherwise than the installed torch,
    outside what a port changes: {"mps": [[line, entry, kernel]] for each MPS row that differs
    from the wheel's and names another function than the entry's CPU kernel (a Mac's libtorch
    links against it: it must be defined in the checkout's mps/ sources), "other": [line,
    what] for the first other difference (a field, a schema, a CPU or composite kernel: a
    libtorch porter did not run), or None}. A Mac builds libtorch from every row (review 20's
    Y07, Y08: another op's row naming a function nothing defines was green). Entries the
    checkout lacks are not read (a miniature leaves most out)."""
    wheel_text = _wheel_text()
    found: dict = {"mps": [], "other": None}
    if wheel_text is None:
        return found
    theirs = {e.full_name: e for e in native_yaml.scan(wheel_text)}
    for entry in native_yaml.scan(checkout_text):
        other = theirs.get(entry.full_name)
        if other is None:
            continue
        mine_mps = [r.kernel for r in entry.mps_rows()][-1:]
        if mine_mps and mine_mps != [r.kernel for r in other.mps_rows()][-1:] and not any(
                r.kernel == mine_mps[0] for r in entry.dispatch if "CPU" in r.keys):
            found["mps"].append([entry.lineno, entry.full_name, mine_mps[0].split("::")[-1]])
        differs = None if found["other"] else _first_difference(entry, other)
        if differs:
            found["other"] = [entry.lineno, differs]
    return found
