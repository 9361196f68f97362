"""native_functions.yaml dispatch rows against the MPS sources (PORTER001-PORTER003).

torchgen accepts `CPU, CUDA, MPS: abs_out` plus `MPS: abs_out_mps` in one entry (the last
row wins, silently): the leftover of a half-done MPSGraph migration. And nothing before the
link step notices an `MPS: x_mps` row whose function no source defines.
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.source.mps_definitions import defined_names
from porter.checks.model import Finding
from porter.checks.tree import Tree, op_of_entry



def check(tree: Tree) -> list[Finding]:
    return (duplicate_mps_keys(tree) + undefined_mps_functions(tree) + orphan_mps_functions(tree)
            + unregistered_mps_stubs(tree))


def unregistered_mps_stubs(tree: Tree) -> list[Finding]:
    """`CPU, CUDA, MPS: tan_out` sends MPS through the structured kernel's DispatchStub
    (`TORCH_IMPL_FUNC(tan_out)` runs `tan_stub`): if no MPS host file registers that stub, the
    tree builds and every MPS call fails with 'tan_stub: missing kernel for mps'. What a
    half-applied port leaves (the MPSGraph impl deleted, its kernel never registered), and what
    `porter status` calls inconsistent."""
    from porter.source.native_definitions import impl_stubs

    shared: dict[str, list[tuple]] = {}     # shared CPU/CUDA/MPS kernel -> (entry, MPS row)
    for entry in tree.mps_entries:
        cpu = {row.kernel for row in entry.dispatch if "CPU" in row.keys}
        mps = [row for row in entry.dispatch if "MPS" in row.keys]
        # torchgen keeps the last MPS row (two are PORTER001's finding)
        if mps and mps[-1].kernel in cpu:
            shared.setdefault(mps[-1].kernel.split("::")[-1], []).append((entry, mps[-1]))
    if not shared:
        return []
    stubs_of: dict[str, list[str]] = {}
    for rel in tree.checkout.glob(co.NATIVE, "*.cpp"):
        text = tree.read(rel)
        if "TORCH_IMPL_FUNC" not in text or not any(k in text for k in shared):
            continue
        for kernel, stubs in impl_stubs(text).items():
            if kernel in shared:
                stubs_of.setdefault(kernel, []).extend(stubs)
    # a registration under `#ifdef FLAG` counts for nothing proven: a build without FLAG has none
    registered = {reg[0] for reg in tree.registrations if tree.unconditionally_registered(reg[0])}
    found = []
    for kernel, rows in sorted(shared.items()):
        # only where the kernel's TORCH_IMPL_FUNC is read (no `<op>_stub` guess: a check
        # speaks from the tree's text)
        stubs = [s for s in dict.fromkeys(stubs_of.get(kernel, ())) if tree.stub(s) is not None]
        # one registered stub is enough: a kernel with several (div_out_mode) may route some
        # cases elsewhere, and the check only speaks where MPS can run nothing at all
        if not stubs or any(s in registered for s in stubs):
            continue
        conditional = [(s, *c) for s in stubs for c in tree.conditional_registrations.get(s, [])]
        for entry, row in rows:
            op = op_of_entry(entry)
            if conditional:
                stub, rel, line, condition = conditional[0]
                found.append(Finding(
                    "PORTER023", co.NATIVE_YAML, row.lineno,
                    f"'{entry.full_name}' sends MPS to the shared {kernel}, which runs {stub}, "
                    f"registered for MPS only under `{condition}` ({rel}:{line}), a condition "
                    f"porter cannot decide: not proven; a build that does not define it fails "
                    f"every MPS call with '{stub}: missing kernel for mps'",
                    f"move the REGISTER_DISPATCH out of the `{condition}` block, where every "
                    "build compiles it", op))
                continue
            found.append(Finding(
                "PORTER023", co.NATIVE_YAML, row.lineno,
                f"'{entry.full_name}' sends MPS to the shared {kernel}, which runs "
                f"{' / '.join(stubs)}, but no MPS host file registers "
                f"{'it' if len(stubs) == 1 else 'any of them'}: every MPS call fails with "
                f"'{stubs[0]}: missing kernel for mps'",
                f"register a Metal kernel on it (porter new-op {op}), or route MPS to an "
                "implementation of its own", op))
    return found


def orphan_mps_functions(tree: Tree) -> list[Finding]:
    """The other half of a half-applied migration: the yaml row of `sign.out` already shares
    `sign_out`, but `TORCH_IMPL_FUNC(sign_out_mps)` is still in UnaryOps.mm. torchgen declares
    no `structured_sign_out_mps` any more, so the file stops compiling; a plain
    `<kernel>_mps` function is dead code."""
    from porter.source.mpsgraph_scan import FUNCTION, IMPL, MACRO, source_of

    named = {row.kernel.split("::")[-1] for e in tree.entries for row in e.dispatch}
    # `<shared kernel>_mps` for each op whose MPS key already shares the CPU/CUDA kernel
    shared = {}
    for entry in tree.mps_entries:
        for row in entry.dispatch:
            if "MPS" in row.keys and not row.kernel.endswith("_mps"):
                shared[row.kernel.split("::")[-1] + "_mps"] = op_of_entry(entry)
    candidates = {name: op for name, op in shared.items() if name not in named}
    if not candidates:
        return []
    found = []
    for rel, text in sorted(tree.mps_source_texts.items()):
        if not rel.endswith(".mm") or not any(name in text for name in candidates):
            continue
        source = source_of(text)
        for d in source.named(set(candidates)):
            op = candidates[d.name]
            if d.shape == FUNCTION or (d.shape == MACRO and not _macro_writes_impl(text, d.macro)):
                # upstream's CREATE_MPS_UNARY_TORCH_IMPL_FUNC(abs_out_mps, absolute) writes a
                # plain `Tensor& abs_out_mps(...)`, which compiles without torchgen
                why = "no yaml row names it any more: dead code a half-applied migration left"
                hint = "delete it"
            elif d.shape in (IMPL, MACRO):
                why = (f"no yaml row names it any more, so torchgen declares no structured_{d.name} "
                       "and this file no longer compiles")
                # new-op refuses ops it cannot port (abs, div on a partial tree): say who knows
                hint = (f"porter new-op {op} deletes it where porter can port {op} (`porter status "
                        f"{op}` says); else delete it by hand")
            else:
                continue
            found.append(Finding(
                "PORTER003", rel, d.line,
                f"{'TORCH_IMPL_FUNC(' + d.name + ')' if d.shape == IMPL else d.name} is the MPSGraph "
                f"implementation of {op}, but {why}", hint, op))
    return found


def _macro_writes_impl(text: str, macro: str | None) -> bool:
    """Whether `#define MACRO(...)` in `text` expands to a TORCH_IMPL_FUNC (a structured impl);
    where the definition is not in the file, assume it does."""
    m = re.search(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(macro or '')}\([^)]*\)((?:[^\n]*\\\n)*[^\n]*)",
                  text, re.M)
    return m is None or re.search(r"\bTORCH_IMPL_FUNC\s*\(", m.group(1)) is not None


def duplicate_mps_keys(tree: Tree) -> list[Finding]:
    found = []
    for entry in tree.mps_entries:
        rows = [row for row in entry.dispatch for key in row.keys if key == "MPS"]
        if len(rows) < 2:
            continue
        first, extra = rows[0], rows[1:]
        for row in extra:
            where = "again in the same row" if row is first else f"first at line {first.lineno}"
            leftover = next((r for r in rows if r.kernel.endswith("_mps")), None)
            if leftover is not None and any(not r.kernel.endswith("_mps") for r in rows):
                hint = (f"delete the `MPS: {leftover.kernel}` row and its MPSGraph impl "
                        f"(porter migrate-from-mpsgraph {op_of_entry(entry)})")
            else:
                hint = "keep one MPS row"
            found.append(Finding(
                "PORTER001", co.NATIVE_YAML, row.lineno,
                f"'{entry.full_name}' names MPS twice ({where}): '{_row_text(first)}' and "
                f"'{_row_text(row)}'; torchgen silently keeps {rows[-1].kernel}",
                hint, op_of_entry(entry)))
    return found


def undefined_mps_functions(tree: Tree) -> list[Finding]:
    wanted = {}
    for entry in tree.mps_entries:
        for row in entry.dispatch:
            kernel = row.kernel.split("::")[-1]
            if "MPS" in row.keys and kernel.endswith("_mps"):
                wanted.setdefault(kernel, []).append((entry, row))
    if not wanted:
        return []
    defined = defined_functions(tree)
    found = []
    for kernel, rows in wanted.items():
        if kernel in defined:
            continue
        for entry, row in rows:
            found.append(Finding(
                "PORTER002", co.NATIVE_YAML, row.lineno,
                f"'{entry.full_name}' dispatches MPS to {kernel}, which no {co.MPS}/ source defines",
                f"define TORCH_IMPL_FUNC({kernel}) or `{kernel}(...)` in {co.OPERATIONS}/, "
                "or drop the row", op_of_entry(entry)))
    return found


def defined_functions(tree: Tree) -> set[str]:
    """Names defined at column 0 of the mps/ .mm and .cpp sources (a cheap over-approximation:
    a declaration also counts, so the check only fires where no trace of the name exists)."""
    return defined_names(tree.mps_source_texts.values())


def _row_text(row) -> str:
    return row.text.strip().split("#", 1)[0].strip()
