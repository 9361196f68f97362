"""Which registrations of a contracted build run a fused multiply-add, read from g++'s dumps.

A contracted build (toolchain.contract_flags) answers differently from the plain one only for
kernels whose code g++ fused an `a*b+c` in. Which code a registration runs is a question of
calls, not of where text sits: a helper of the file or of a c10/metal header counts for the
kernels that call it, and for no other (a complex multiply in a header that only the file's
hand-written `[[kernel]]` templates call fused nothing heaviside runs). So the answer is read
from the compiler itself: its symbol table as the whole-program pass leaves it
(`-fdump-ipa-whole-program`: calls and address references, after early inlining and before the
fma pass, so a function inlined later is still inside a caller the table names; g++ writes no
`-fdump-ipa-cgraph` where a precompiled header is used), walked from each
`porter_registration_<NAME>__<N>` variable (porter/prelude.h names them so), and its
widening-multiply pass's dump (`-fdump-tree-widening_mul-details-lineno`), which lists each fma
with its function and line.

An fma inside porter's Metal shim is Apple's library, whose code a Mac's compiler does not
see: it counts only on a line marked `// porter: may contract NAME` (mad, mix, dot: Metal's own
formulas, which Apple's library may run as one fma or not). What cannot be read, or an fma in
a function the call graph does not name, counts for every registration (ANYWHERE): a
contracted run more, never a miss.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

ANYWHERE = "*"      # an fma no registration can be told apart from: every kernel may run it

# `;; Function float k(float, float) (_Z1kff, funcdef_no=989, ..., symbol_order=948)`
_FUNCTION = re.compile(r"^;; Function .*? \((\S+?), funcdef_no=\d+.*?symbol_order=(\d+)", re.M)
# `  [file:line:col] _5 = .FMA (a_2(D), b_3(D), 1.0e+0);` (.FMS, .FNMA, .FNMS alike); a
# statement g++ folded as it fused (`x + (y - x) * a` with x negated: `_21 = .FMS (...)`) has
# no location, and counts wherever it is
_FMA = re.compile(r"^\s*(?:\[([^\]]+?):(\d+):\d+\] )?[\w.]+ = \.FN?M[AS] \(", re.M)
# a symbol table node: `_Z4elemI1AEfff/1000 (float elem...) @0x...`, a variable's
# `_ZL27porter_registration_heaviside__3/945 (...)`
_NODE = re.compile(r"^(\S.*?)/(\d+) \(")
_EDGE = re.compile(r"/(\d+)(?=[\s(]|$)")
_ROOT = re.compile(r"porter_registration_(\w+)__\d+$")


def fused_registrations(fma_dump: Path, symbols_dump: Path, shim_dir: str) -> set[str]:
    """The registered names whose code holds an fma that counts (the module's docstring),
    or {ANYWHERE}."""
    try:
        fmas = fma_dump.read_text(encoding="utf-8", errors="replace")
        graph = symbols_dump.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {ANYWHERE}
    fused_orders = _fused_functions(fmas, shim_dir)
    if not fused_orders:
        return set()
    calls, roots, orders_by_asm = _call_graph(graph)
    reach_of = {name: _reachable(starts, calls) for name, starts in roots.items()}
    owners: set[str] = set()
    for order, asm in fused_orders:
        # a clone g++ made after the call graph (`f.constprop.0`) is its original's
        known = order if order in calls else orders_by_asm.get(asm.partition(".")[0])
        if known is None:
            return {ANYWHERE}
        owners |= {name for name, reach in reach_of.items() if known in reach}
    return owners


def _fused_functions(dump: str, shim_dir: str) -> set[tuple[int, str]]:
    """(symbol order, assembler name) of each function the dump shows an fma in that
    counts."""
    heads = [(m.start(), int(m.group(2)), m.group(1)) for m in _FUNCTION.finditer(dump)]
    out = set()
    for m in _FMA.finditer(dump):
        file = m.group(1)
        if file is not None and file.startswith(shim_dir) and \
                int(m.group(2)) not in _may_contract_lines(file):
            continue
        owner = next((h for h in reversed(heads) if h[0] < m.start()), None)
        out.add((owner[1], owner[2]) if owner is not None else (-1, ""))
    return out


def _call_graph(dump: str) -> tuple[dict[int, set[int]], dict[str, set[int]], dict[str, int]]:
    """order -> the orders it calls or takes the address of; registered name -> the orders
    of its registration variables; assembler name -> order."""
    calls: dict[int, set[int]] = {}
    roots: dict[str, set[int]] = {}
    by_asm: dict[str, int] = {}
    node = None
    for line in dump.split("\n"):
        m = _NODE.match(line)
        if m:
            node = int(m.group(2))
            calls.setdefault(node, set())
            head = m.group(1)
            root = _ROOT.search(head)
            if root:
                roots.setdefault(root.group(1), set()).add(node)
            elif " " not in head:
                by_asm.setdefault(head, node)
            continue
        if node is not None and line.startswith(("  Calls:", "  References:")):
            calls[node].update(int(e) for e in _EDGE.findall(line.partition(":")[2]))
    return calls, roots, by_asm


def _reachable(starts: set[int], calls: dict[int, set[int]]) -> set[int]:
    seen, todo = set(starts), list(starts)
    while todo:
        for nxt in calls.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


_MAY_CONTRACT = re.compile(r"//\s*porter: may contract (\w+)")


@functools.cache
def _may_contract_lines(path: str) -> frozenset[int]:
    """The 1-based lines of a shim header marked `porter: may contract NAME`."""
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except OSError:
        return frozenset()
    return frozenset(i for i, line in enumerate(lines, 1) if _MAY_CONTRACT.search(line))
