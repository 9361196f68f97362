"""`porter check`: tree-wide static checks, one module per check family.

Each family is a function `check(tree) -> list[Finding]` over a shared `Tree` that reads
and scans every file once. Ids are stable (`porter.checks.model.CHECKS`).

May import: `porter.source`, `porter.runtime`, `porter.apply` (its table output),
`porter.errors`. Never the commands or the surveys, which read its findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from porter.checks.model import CHECKS, Finding

if TYPE_CHECKING:       # imported lazily: `porter check` forks torchgen's child before loading them
    from porter.source.checkout import Checkout
    from porter.checks.torchgen_child import Pending
    from porter.checks.tree import Tree

# (ids a family reports, module under porter.checks); torchgen last: it is the slow one.
FAMILIES = (
    (("PORTER001", "PORTER002", "PORTER003", "PORTER023"), "dispatch"),
    (("PORTER010", "PORTER011", "PORTER012", "PORTER013", "PORTER014"), "kernels"),
    (("PORTER020", "PORTER021", "PORTER022", "PORTER024"), "registrations"),
    (("PORTER030", "PORTER031", "PORTER032"), "expectations"),
    (("PORTER050", "PORTER051", "PORTER052", "PORTER053"), "review"),
    (("PORTER040",), "torchgen_yaml"),
)


@dataclass
class Report:
    findings: list[Finding]
    ran: list[str]                      # check ids that ran
    notes: list[str] = field(default_factory=list)


def run(checkout: "Checkout", selected: set[str] | None = None, tree: "Tree | None" = None,
        pending: "Pending | None" = None) -> Report:
    """Run the selected checks (default: all) over the checkout.

    `pending`: torchgen's parse already started by the caller (torchgen_child.Pending).
    """
    import importlib

    from porter.checks import torchgen_yaml
    from porter.checks.tree import Tree

    wanted = set(CHECKS) if selected is None else set(selected)
    tree = tree or Tree(checkout)
    findings: list[Finding] = []
    ran: list[str] = []
    if "PORTER040" not in wanted and pending is not None:
        pending.close()
        pending = None
    # torchgen first, in a child process: it overlaps every other check
    if "PORTER040" in wanted and pending is None:
        pending = torchgen_yaml.start(tree)
    try:
        for ids, module in FAMILIES:
            if not wanted.intersection(ids) or module == "torchgen_yaml":
                continue
            family = importlib.import_module(f"porter.checks.{module}")
            findings += [f for f in family.check(tree) if f.id in wanted]
            ran += [i for i in ids if i in wanted]
        if pending is not None:
            found, validated = torchgen_yaml.collect(tree, pending)
            findings += found
            if validated:           # skipped (no torchgen): not counted among the checks run
                ran.append("PORTER040")
    finally:
        if pending is not None:
            pending.close()
    findings.sort(key=lambda f: f.sort_key)
    return Report(findings, ran, tree.notes)
