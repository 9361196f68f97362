"""Do the OpInfos a test run imports say what the checkout's OpInfo source says?

Planning (`porter new-op`, `migrate-from-mpsgraph`) reads the checkout's OpInfo definitions
without importing them; a test imports an op database: the checkout's torch when it is
importable, else the installed torch's. Where the two differ for a tested op (its MPS dtypes),
or the checkout has no OpInfo for it, the run says so: the port was planned from one source
and tested against another.
"""

from __future__ import annotations


def notes(checkout, results, db) -> list[str]:
    if checkout is None or getattr(db, "source", "") == "checkout":
        return []
    from porter.port.resolve import mps_dtypes
    from porter.source.opinfo_source import for_op

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
