"""common_mps.py expectation entries against the OpInfos and the yaml (PORTER030, PORTER031).

The lists only exist on a Mac (`if torch.backends.mps.is_available():`), so Linux CI never
evaluates them: a misspelt key xfails nothing and nobody notices. Keys are the OpInfo name
plus its variant_test_name with no separator (`rounddecimals_0`).
"""

from __future__ import annotations

import difflib

from porter.source import checkout as co
from porter.source import fallback_example as fallback_example_mod
from porter.checks.model import Finding
from porter.checks.tree import Tree
from porter.source.dtypes import ALIASES, METAL

UNIMPLEMENTED = "UNIMPLEMENTED_XFAILLIST"


def check(tree: Tree) -> list[Finding]:
    return unknown_keys(tree) + stale_unimplemented(tree) + fallback_example(tree)


def fallback_example(tree: Tree) -> list[Finding]:
    """test_mps.py's TestFallbackWarning runs an op that must have no MPS kernel (upstream
    changes it whenever a port gives that op one): an op it names that has an MPS row now fails
    the test on a Mac (review 34; the port commands say so as they port it, porter.port.plan)."""
    if not tree.checkout.exists(co.TEST_MPS):
        return []
    example = fallback_example_mod.named_ops(tree.read(co.TEST_MPS))
    if example is None:
        return []
    line, named = example
    found = []
    for op in named:
        row = _mps_row(tree, op)
        if row is None:
            continue
        entry, dispatch = row
        found.append(Finding(
            "PORTER032", co.TEST_MPS, line,
            f"TestFallbackWarning.{fallback_example_mod.FUNCTION} runs {op} as an op without an "
            f"MPS kernel, but {entry.full_name} has one ({co.NATIVE_YAML}:{dispatch.lineno} "
            f"'{dispatch.text.strip()}'): on a Mac the fallback warning it waits for never "
            "comes", "name another op that has no MPS kernel there (its `aten::` schema "
            "string and the call), as upstream does when it ports the one named", op))
    return found


def _list_entries(tree: Tree):
    """Entries of the upper-case lists (XFAILLISTs, SKIPLISTs, SUPPORTED_COMPLEX_OPS)."""
    return [e for e in tree.expectation_entries if e.dict_name.isupper()]


def unknown_keys(tree: Tree) -> list[Finding]:
    entries = _list_entries(tree)
    if not entries:
        return []
    keys = tree.opinfos.keys
    found = []
    for e in entries:
        if e.key in keys:
            continue
        close = difflib.get_close_matches(e.key, keys, n=1, cutoff=0.85)
        hint = f"did you mean '{close[0]}'?" if close else "keys are OpInfo name + variant_test_name, no separator"
        found.append(Finding("PORTER030", co.COMMON_MPS, e.line,
                             f"'{e.key}' in {e.dict_name} ({e.function}) names no OpInfo", hint,
                             tree.to_op(e.key)))
    return found


def stale_unimplemented(tree: Tree) -> list[Finding]:
    found = []
    for e in _list_entries(tree):
        if e.dict_name != UNIMPLEMENTED or e.function != "mps_ops_modifier":
            continue
        # A variant (normnuc, rounddecimals_0) exercises an argument path the yaml cannot
        # tell apart from the op's other paths: only plain op keys are judged.
        heads = [h for h in tree.opinfos.by_key.get(e.key, []) if not h.is_ref and not h.variant]
        for op in dict.fromkeys(h.aten for h in heads):
            row = _mps_row(tree, op)
            if row is None:
                continue
            if e.dtypes is not None and not _kernel_covers(tree, op, e.dtypes):
                continue
            entry, dispatch = row
            what = "every dtype" if e.dtypes is None else ", ".join(e.dtypes)
            # --device auto is the Mac's GPU on a Mac, the emulator elsewhere. The emulator runs
            # the Metal kernel behind a function the row shares with CPU (`CPU, CUDA, MPS: x_out`,
            # whose stub runs it); an MPS-only function (`MPS: x_mps`, MPSGraph or its own host
            # code) it does not model, so only a Mac confirms that entry
            keys = dispatch.text.split(":", 1)[0]
            shared = "CPU" in {k.strip() for k in keys.split(",")}
            hint = (f"confirm with `porter test {e.key} --prune-xfails`, or drop the entry" if shared
                    else f"confirm on a Mac with `porter test {e.key} --prune-xfails --device mps` "
                         f"(its MPS function is not one the emulator runs), or drop the entry")
            found.append(Finding(
                "PORTER031", co.COMMON_MPS, e.line,
                f"'{e.key}' is xfailed as unimplemented ({what}), but {entry.full_name} has an MPS "
                f"kernel ({co.NATIVE_YAML}:{dispatch.lineno} '{dispatch.text.strip()}')",
                hint, op))
            break
    return found


def _mps_row(tree: Tree, op: str):
    for entry in tree.mps_family(op):
        rows = entry.mps_rows()
        if rows:
            return entry, rows[0]
    return None


def _kernel_covers(tree: Tree, op: str, dtypes: tuple[str, ...]) -> bool:
    """Whether the op's Metal kernel registers every dtype of a partial xfail entry."""
    kernels = [k for k, ops in tree.kernel_op_lists.items() if op in ops]
    registered = {r.in_type for m in tree.metals.values() for k in kernels for r in m.kernels().get(k, [])}
    if not registered:
        return False
    return all(METAL.get(ALIASES.get(d, d)) in registered for d in dtypes)

