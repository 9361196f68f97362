"""Do the OpInfos a test run imports say what the checkout's OpInfo source says?

Planning (`porter new-op`, `migrate-from-mpsgraph`) reads the checkout's OpInfo definitions
without importing them; a test imports an op database: the checkout's torch when it is
importable, else the installed torch's. Where the two differ for a tested op (its MPS dtypes),
or the checkout has no OpInfo for it, the run says so: the port was planned from one source
and tested against another. Where the checkout's OpInfo files are the op database's own,
byte for byte, nothing can differ and they are not read.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

from porter.source.checkout import Checkout, opinfo_files


def notes(checkout, results, db) -> list[str]:
    if checkout is None or getattr(db, "source", "") == "checkout":
        return []
    if same_sources(checkout, getattr(db, "torch_path", None)):
        return []       # the op database was imported from these very bytes: nothing differs
    from porter.source.opinfo_source import for_op, mps_dtypes

    found: list[str] = []
    tested: dict[str, set[str]] = {}
    for r in results:
        if getattr(r, "reference", False) or getattr(r, "via", None):
            continue
        tested.setdefault(r.name, set()).update(d for d in r.supported if not d.startswith("complex"))
    installed = f"the installed torch {db.torch_version}'s"
    for name, sent in tested.items():
        op = name.removeprefix("nn.functional.").replace(".", "_", 1)
        opinfos, _ = for_op(checkout, op)
        if not opinfos:
            found.append(f"the checkout has no OpInfo for {name} (torch/testing/_internal): "
                         f"tested with {installed}, and a port plans its dtypes without one")
            continue
        planned = {d for d in mps_dtypes(opinfos) if not d.startswith("complex")}
        if planned and planned != sent:
            where = f"{opinfos[0].path}:{opinfos[0].line}"
            found.append(f"the checkout's OpInfo for {name} ({where}) sends "
                         f"{', '.join(sorted(planned))} on MPS, {installed} sends "
                         f"{', '.join(sorted(sent))}: a port registers the checkout's, this run "
                         "tests the installed one's (build the checkout's torch to test its own)")
    return found


def same_sources(checkout: Checkout, torch_path: str | None) -> bool:
    """Whether the checkout's OpInfo files are those of the torch package at `torch_path`
    (the op database's), the same names with the same bytes. Then the checkout's OpInfos are
    the tested ones, and their source is not read."""
    if not torch_path or not Path(torch_path, "__init__.py").is_file():
        return False
    installed = Checkout(Path(torch_path).parent)    # its files are named "torch/testing/..."
    files = opinfo_files(checkout)
    return bool(files) and files == opinfo_files(installed) and all(
        filecmp.cmp(checkout.root / rel, installed.root / rel, shallow=False) for rel in files)
