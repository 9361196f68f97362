"""Is what a tested OpInfo reaches the installed torch's?

A test run imports the installed torch's op database; a Mac's test_mps.py imports the
checkout's. Where the checkout's OpInfo files differ from the installed ones, the verdict holds
only if the op's OpInfo call and the module-level functions and classes it reaches (its sample
and reference input functions, the Info class, the helpers they call, followed through the
OpInfo files) are the installed torch's, as Python reads them: comments and layout aside.
Review 21's E07: the checkout's heaviside OpInfo gained a `sample_inputs_func` whose input
only the checkout's samples held; a kernel wrong on it was green, as the run used the
installed samples.

The keywords other rules read (porter.harness.opinfo_agreement: the decorators, the MPS
dtypes) and those only another device reads are left to them. A definition the checkout has
no file for (a partial checkout: the installed one's stands in, as for headers) is not
compared.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from porter.source.checkout import TESTING, Checkout, opinfo_files

# read by opinfo_agreement's own rules (mps_decorators, _untested_dtypes)
_RULED = {"decorators", "skips", "dtypes", "dtypesIfMPS"}
# what only another device's test reads
_OTHER_DEVICE = {"dtypesIfCUDA", "dtypesIfROCM", "dtypesIfHpu", "dtypesIfXPU", "backward_dtypesIfCUDA",
                 "backward_dtypesIfROCM", "backward_dtypesIfHpu", "backward_dtypesIfXPU"}
_LEFT = _RULED | _OTHER_DEVICE
_FOLLOWED = 400         # definitions followed at most: a bound on a pathological chain

_TOP = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)", re.M)
_BLOCK_END = re.compile(r"^(?=[^\s#)\]}@])", re.M)


def _files(checkout: Checkout) -> list[str]:
    """The OpInfo files and the opinfo package's own modules (core.py holds the Info classes
    and the default sample functions)."""
    return sorted(set(opinfo_files(checkout)) | set(checkout.glob(f"{TESTING}/opinfo", "*.py")))


@lru_cache(maxsize=64)
def _definitions(text: str) -> dict[str, str]:
    """Module-level `def`/`class` name -> its source text, decorators included (the last
    definition of a name wins, as Python binds it)."""
    found: dict[str, str] = {}
    for m in _TOP.finditer(text):
        start = m.start()
        # decorator lines just above belong to it
        while True:
            prev = text.rfind("\n", 0, max(0, start - 1))
            line = text[prev + 1:start - 1] if start else ""
            if not line.startswith("@"):
                break
            start = prev + 1
        end = _BLOCK_END.search(text, text.find("\n", m.end()) + 1)
        found[m.group(1)] = text[start:end.start() if end else len(text)]
    return found


@lru_cache(maxsize=4096)
def _shape(source: str) -> str:
    """What Python reads of a definition: its AST, without positions; the text without trailing
    blanks where it does not parse alone."""
    try:
        return ast.dump(ast.parse(source))
    except SyntaxError:
        return "\n".join(line.rstrip() for line in source.strip().split("\n"))


def _names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


class _Index:
    """The module-level definitions of one tree's OpInfo files: name -> (file, source)."""

    def __init__(self, checkout: Checkout):
        self.files = set(_files(checkout))
        self.defs: dict[str, tuple[str, str]] = {}
        for rel in sorted(self.files):
            for name, source in _definitions(checkout.read(rel)).items():
                self.defs.setdefault(name, (rel, source))


def first_difference(checkout: Checkout, installed: Checkout, mine, theirs) -> str | None:
    """Where the checkout's OpInfo `mine` (opinfo_source.OpInfoSource) or what it reaches first
    differs from the installed torch's `theirs`, in words; None where they agree."""
    if mine.cls != theirs.cls or [ast.dump(a) for a in mine.node.args] != \
            [ast.dump(a) for a in theirs.node.args]:
        return f"its call is `{mine.cls}(...)`, the installed one's `{theirs.cls}(...)`"
    ours = {k.arg: k.value for k in mine.node.keywords if k.arg not in _LEFT}
    wheel = {k.arg: k.value for k in theirs.node.keywords if k.arg not in _LEFT}
    for key in sorted(set(ours) | set(wheel), key=str):
        a, b = ours.get(key), wheel.get(key)
        if a is None or b is None or ast.dump(a) != ast.dump(b):
            label = "a `**` argument" if key is None else f"`{key}=`"
            how = "only the checkout's has" if b is None else (
                "only the installed one's has" if a is None else "differs")
            return f"{label} {how}"
    mine_index, their_index = _Index(checkout), _Index(installed)
    queue = [mine.cls] + [n for value in ours.values() for n in _names(value)]
    seen: set[str] = set()
    while queue and len(seen) < _FOLLOWED:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        here, there = mine_index.defs.get(name), their_index.defs.get(name)
        if here is None and there is None:
            continue                    # a builtin, an import, a parameter
        if here is None and there[0] not in mine_index.files:
            continue                    # a file the checkout does not have: the installed one's
        if here is None or there is None:
            where = here[0] if here else there[0]
            return (f"`{name}` ({where}) is defined only in the "
                    + ("checkout's" if here else "installed torch's") + " OpInfo files")
        if _shape(here[1]) != _shape(there[1]):
            line = checkout.read(here[0])[:checkout.read(here[0]).find(here[1])].count("\n") + 1
            return f"`{name}` ({here[0]}:{line}), which it reaches, differs"
        try:
            queue += _names(ast.parse(here[1]))
        except SyntaxError:
            pass
    return None
