"""`porter pr OP...`: the pull-request description of a port, in upstream's shape.

What a reviewer of an MPS port asks for, each measured here rather than asserted: what moved
(yaml rows, the MPSGraph code deleted, the Metal kernel and host stub added), the files, the
emulated verdicts per dtype (upstream's samples, the reference inputs, the --shapes layouts),
the expectations removed and kept, the exact commands that run the op's upstream tests on a
Mac, and the review checklist (pytorch#187827) with each item's finding. The verdicts come from
the same harness and rows as `porter test --device emulate` (porter.harness.verdict_scope.FULL).
"""

from __future__ import annotations

from porter.source import checkout as co
from porter.review import testnames
from porter.review.branch import Branch
from porter.review.facts import OpFacts, gather

PASS = "pass"
SKIP = "skip"
RED = ("fail", "xpass")
NOT_RUN = "not run"           # a checklist item nothing measured: never ok
NOT_APPLICABLE = "n/a"        # a checklist item with nothing to check (a file with no version guard)
REVIEW_CHECKS = ("PORTER003", "PORTER032", "PORTER050", "PORTER051", "PORTER052", "PORTER053")
# row kinds of the verdict table, in column order
KINDS = ("samples", "reference", "shapes")


def describe(checkout: co.Checkout, ops: list[str], base: str | None = None,
             device: str = "emulate", dtypes: list[str] | None = None,
             uncommitted: list[str] = (), step=None) -> dict:
    """The description of `checkout` (for `porter pr`, a worktree of HEAD: porter.review.tip);
    `uncommitted`: the user's changes beyond it, which the description warns it leaves out.
    `step(what)` is told each step as it starts (the command shows it on a terminal: the
    verdicts take seconds to a minute)."""
    from porter import checks

    step = step or (lambda what: None)
    step(f"porter pr: reading the branch's changes to {', '.join(ops)}")
    from porter.checks.tree import Tree

    branch = Branch(checkout.root, base)
    tree = Tree(checkout)
    facts = [gather(checkout, branch, op, tree) for op in ops]
    for f in facts:
        if not f.kernels and not f.yaml:
            from porter.errors import PorterError
            hint = (f"commit the port first: porter pr describes the commit HEAD, and "
                    f"{', '.join(uncommitted[:3])}{' ...' if len(uncommitted) > 3 else ''} "
                    "are uncommitted") if uncommitted else \
                f"port it first (porter status {f.op}), or pass --base REF"
            raise PorterError(f"{f.op}: the branch changed nothing of it since {branch.base_ref} and "
                              "HEAD registers no Metal kernel for it", hint=hint)
    if branch.base == branch.head():
        # the port committed on main: main's merge base with HEAD is HEAD, and a description of
        # that diff moves nothing and says the op "had no MPS kernel" (review 40)
        from porter.errors import PorterError
        raise PorterError(f"the base {branch.base_ref} is HEAD itself ({branch.base[:12]}): the "
                          "pull request's diff against it is empty, and there is nothing to describe",
                          hint="pass the commit before the port, e.g. --base HEAD~1 (or the "
                               "upstream commit it forks from)")
    results, header, test_gaps = _verdicts(checkout, ops, device, dtypes, step)
    if dtypes:
        # the pull request sends every dtype to a Mac's test: a description of some is not a
        # green one (review 42's F3: `--dtype int32` described a port red on floats as green)
        test_gaps = test_gaps + [f"only {', '.join(dtypes)} tested (--dtype); the Mac test "
                                 "commands below run every dtype the MPS test sends"]
    step("porter pr: running the review checks")
    report = checks.run(checkout, set(REVIEW_CHECKS), tree)
    files = branch.files()
    warnings = []
    if uncommitted:
        warnings.append(f"{len(uncommitted)} uncommitted change(s) are not in this description, "
                        f"which tests the commit HEAD ({branch.head()[:12]}) as the pull request "
                        f"sends it: {', '.join(uncommitted[:5])}{' ...' if len(uncommitted) > 5 else ''}"
                        "; commit them to describe them")
    changed_kernels = {c.path for c in files if c.path.endswith(".metal")}
    reference_gaps = _reference_gaps(checkout, branch, ops)
    device_name = testnames.consistency_device(checkout)
    data = {
        "ops": ops,
        "base": branch.base_ref,
        "base_commit": branch.base,
        "commit": branch.head(),
        "warnings": warnings,
        "device": device,
        "verdict_source": header,
        "files": [c._asdict() for c in files],
        "moved": [_moved(f) for f in facts],
        "verdicts": _rows(results, device_name),
        "shapes": next((r.shapes for r in results if r.shapes), []),
        "removed_xfails": [e._asdict() | {"op": f.op} for f in facts for e in f.xfails_removed],
        "removed_decorators": [e._asdict() | {"op": f.op} for f in facts for e in f.decorators_removed],
        "kept_decorators": [e._asdict() | {"op": f.op} for f in facts for e in f.decorators_kept],
        "commands": _commands(results, device_name),
        "checklist": _checklist(facts, results, report.findings, changed_kernels, device,
                                _guarded(tree, facts)),
        "not_proven": [f"{op}: {why}" for op, why in reference_gaps.items()] + test_gaps,
    }
    data["checklist"].insert(0, _reference_item(ops, reference_gaps, branch.base_ref))
    if test_gaps:
        data["checklist"].insert(0, {"item": "the verdict is proven (what porter tested with is "
                                             "what a Mac reads)", "status": NOT_RUN,
                                     "finding": "not proven: " + "; ".join(test_gaps)})
    # red where a Mac's run would be: a failure or an unexpected success (an xfail that stays,
    # softplus's integers, is what the port leaves expected)
    data["ok"] = (not any(v[k] in RED for v in data["verdicts"] for k in KINDS)
                  and all(item["status"] not in ("fail", NOT_RUN) for item in data["checklist"]))
    return data


def _verdicts(checkout: co.Checkout, ops: list[str], device: str, dtypes: list[str] | None = None,
              step=lambda what: None):
    from porter.harness import opinfo_run as runner
    from porter.harness.devices import get_backend
    from porter.harness.verdict_scope import FULL
    backend = get_backend(device, checkout.root)
    reason = backend.unavailable_reason()
    if reason:
        from porter.errors import PorterError
        raise PorterError(reason)
    step("porter pr: loading the op database")
    ctx = runner.make_context(checkout.root, backend, checkout)
    results = []
    try:
        for op in ops:
            step(f"porter pr: testing {op} on {device}")
            results += runner.run_op_tests(op, checkout.root, backend, dtypes=dtypes, ctx=ctx,
                                           reference_inputs=FULL.reference_inputs,
                                           shapes=FULL.shapes)
        # what `porter test` calls not proven, the same here (porter.harness.session): headers
        # older than the kernel file, a checkout OpInfo that differs from the tested one
        from porter.harness import opinfo_agreement
        gaps = list(backend.header_gaps()) if hasattr(backend, "header_gaps") else []
        opinfo_agreement.drop_unsent(checkout, results, ctx.db)
        gaps += opinfo_agreement.unproven(checkout, results, ctx.db)
    finally:
        close = getattr(backend, "close", None)
        if close:
            close()
    only = "".join(f" --dtype {d}" for d in dtypes or [])
    header = (f"porter test {' '.join(ops)} --device {device}{only} "
              f"(op_db: torch {ctx.db.torch_version}; tolerances from {ctx.lists.source})")
    return results, header, gaps


def _rows(results, device_name: str) -> list[dict]:
    from porter.harness.run_report import is_not_proven
    rows: dict[tuple[str, str], dict] = {}
    for r in results:
        kind = "reference" if r.reference else "shapes" if r.shapes else "samples"
        for d in r.dtypes:
            row = rows.setdefault((r.op, d.dtype), {
                "opinfo": r.op, "dtype": d.dtype, **{k: None for k in KINDS},
                **{f"{k}_count": 0 for k in KINDS}, "message": None, "proven_red": False,
                "upstream_test": _upstream_test(r, d.dtype, device_name)})
            row[kind], row[f"{kind}_count"] = d.outcome, d.samples
            # red that porter saw, not a row whose reason is "not proven" (what it cannot model)
            if d.outcome in RED and not (d.outcome == "fail" and is_not_proven(d.message)):
                row["proven_red"] = True
            if d.message and d.outcome != PASS and row["message"] is None:
                row["message"] = f"{kind}: {d.message}"
    return list(rows.values())


def _upstream_test(r, dtype: str, device_name: str) -> str | None:
    """The Mac test that runs this row's kernel (None: none does, e.g. a backward op's
    bfloat16, which test_output_grad_match does not send)."""
    if r.via:       # a backward op: its kernel runs in the forward op's gradient test
        return testnames.output_grad_match(testnames.forward_opinfo(r.via), dtype, device_name)
    return testnames.output_match(r.op, dtype, device_name)


def _commands(results, device_name: str) -> list[str]:
    out = []
    for r in results:
        if r.reference or r.shapes:
            continue
        if r.via:
            found = testnames.backward_commands(testnames.forward_opinfo(r.via), device_name)
        else:
            grad = any(d.dtype.startswith(("float", "bfloat", "complex")) for d in r.dtypes)
            found = testnames.commands(r.op, device_name, grad)
        out += [c for c in found if c not in out]
    return out


def _moved(f: OpFacts) -> dict:
    return {"op": f.op, "was_mpsgraph": f.was_mpsgraph,
            "yaml": [y._asdict() for y in f.yaml],
            "mpsgraph_removed": [r._asdict() for r in f.mpsgraph_removed],
            "kernels": [k._asdict() for k in f.kernels], "host": f.host}


def _reference_gaps(checkout: co.Checkout, branch: Branch, ops: list[str]) -> dict[str, str]:
    """op -> why its CPU reference is not this checkout's (porter.checks.cpu_reference): the
    branch edits its CPU kernel since the base, or CPU code porter cannot tie to one op."""
    from porter.checks import changed, cpu_reference
    changes = changed.since(checkout.root, branch.base)
    changes.ref = branch.base_ref
    return cpu_reference.not_this_checkouts(checkout, changes, ops, branch.base_checkout().read)


def _reference_item(ops: list[str], gaps: dict[str, str], base: str) -> dict:
    item = "the CPU reference is this checkout's CPU kernel"
    if gaps:
        return {"item": item, "status": NOT_RUN,
                "finding": "not proven: " + "; ".join(f"{op}: {why}" for op, why in gaps.items())}
    return {"item": item, "status": "ok",
            "finding": f"the branch changes no CPU code since {base}, so the reference (the "
                       "installed torch's CPU) is the base's kernel, as far as the wheel is the base"}


def _guarded(tree, facts: list[OpFacts]) -> dict[str, bool]:
    """Each kernel file of the ops: whether it has a `#if __METAL_VERSION__ >= ...` guard."""
    from porter.checks.review import guard_spans
    paths = {k.path for f in facts for k in f.kernels}
    return {rel: bool(guard_spans(tree.metals[rel].mask)) for rel in sorted(paths) if rel in tree.metals}


# Where the checkout's own kernel entry points run: only a Mac's full build (--device mps). The
# emulator runs each functor through porter's own loop (it redefines the REGISTER_* macros, so
# c10/metal/indexing.h's dense and strided kernels are never instantiated); mps-shader runs the
# dense entry point of contiguous copies.
RUNS_CHECKOUT_STRIDED = ("mps",)


def _checklist(facts: list[OpFacts], results, findings, changed_kernels: set[str],
               device: str = "emulate", guarded: dict[str, bool] | None = None) -> list[dict]:
    ops = {f.op for f in facts}
    mine = [x for x in findings if x.op in ops or (x.id == "PORTER052" and x.path in changed_kernels)]

    def found(*ids):
        return [f"{x.path}:{x.line}: {x.id} {x.message}" for x in mine if x.id in ids]

    items = []
    # 1. the old shape-cached MPSGraph path really removed, not left beside the new kernel
    left = [f"{r.path}:{r.line}: {r.what} ({f.op})" for f in facts for r in f.mpsgraph_left] + found("PORTER003")
    removed = [f"{r.what} ({r.path})" for f in facts for r in f.mpsgraph_removed]
    items.append(_item("MPSGraph path removed", left, (
        "deleted: " + "; ".join(removed) if removed else "no MPSGraph implementation existed")
        + "; none of the ops' MPSGraph code is left (PORTER003 clean)"))
    if found("PORTER032"):
        # TestFallbackWarning, beside test_output_match in test_mps.py, fails on a Mac once the
        # op it runs as one without an MPS kernel has one (listed only where it does)
        items.append(_item("TestFallbackWarning's example op still lacks an MPS kernel",
                           found("PORTER032"), ""))
    items.append(_item("no `fast::` math in the functors", found("PORTER050"),
                       "PORTER050 clean: the functors use precise:: / c10::metal math"))
    items.append(_item("no bespoke helper where c10/metal has one", found("PORTER052"),
                       "PORTER052 clean over the changed kernel files"))
    guarded = guarded or {}
    bfloat = "bfloat registrations inside the file's version guard"
    if found("PORTER053") or any(guarded.values()):
        files = ", ".join(_short(rel) for rel, has in guarded.items() if has)
        items.append(_item(bfloat, found("PORTER053"),
                           f"PORTER053 clean ({files}: inside its __METAL_VERSION__ guard)"))
    else:
        # no guard to be inside: upstream's files since Metal 3.1 register bfloat unguarded
        unguarded = ", ".join(_short(rel) for rel in guarded) or "the ops' kernel files"
        items.append({"item": bfloat, "status": NOT_APPLICABLE,
                      "finding": f"not applicable: {unguarded} has no __METAL_VERSION__ guard "
                                 "(the file targets a Metal with bfloat everywhere)"})
    # NaN propagation: the static check, and the reference inputs (NaN, ±inf) measured; a
    # reference-input failure whose elements hold no NaN is filed under the edge values below
    # (heaviside wrong at ±0 was ticked "[ ] NaN propagation")
    reference = [(r.op, d) for r in results if r.reference for d in r.dtypes]
    floats = [(op, d) for op, d in reference if d.dtype.startswith(("float", "bfloat", "complex"))]
    nan_fail = found("PORTER051") + [f"{op} {d.dtype}: reference inputs {d.outcome}{_first_row(d)}"
                                     for op, d in floats if d.outcome != PASS and _nan_involved(d)]
    passed = sorted({d.dtype for _, d in floats if d.outcome == PASS})
    # a dtype whose reference inputs failed for another reason (a wrong edge value, a build
    # error) says nothing of its NaN values: its table shows the first failing sample only.
    # A build error failing every dtype was ticked "[x] ... pass on float32"
    hidden = sorted({d.dtype for _, d in floats if d.outcome not in (PASS, SKIP)} - {
        d.dtype for _, d in floats if d.outcome != PASS and _nan_involved(d)})
    if nan_fail or (passed and not hidden):
        items.append(_item("NaN propagation", nan_fail,
                           f"PORTER051 clean; reference inputs (NaN, ±inf, ±0) pass on "
                           f"{', '.join(passed)}"))
    elif hidden:
        items.append({"item": "NaN propagation", "status": NOT_RUN,
                      "finding": f"not proven on {', '.join(hidden)}: its reference inputs fail "
                                 "for another reason (edge values below), which hides the NaN "
                                 "values' answers" + (f"; pass on {', '.join(passed)}" if passed else "")})
    else:
        # nothing measured NaN: unticked (it said "[x] ... pass on no floating dtype")
        items.append({"item": "NaN propagation", "status": "todo",
                      "finding": "PORTER051 clean; not measured: no floating dtype's reference "
                                 "inputs ran"})
    edge = "edge values: ±0, ±inf, subnormals, each dtype's limits (reference inputs)"
    edge_fail = [f"{op} {d.dtype}: reference inputs {d.outcome}{_first_row(d)}"
                 for op, d in reference if d.outcome not in (PASS, SKIP) and not _nan_involved(d)]
    measured = sorted({d.dtype for _, d in reference if d.outcome == PASS})
    ran_reference = sorted({d.dtype for _, d in reference if d.outcome != SKIP})
    if measured or edge_fail:
        items.append(_item(edge, edge_fail, f"reference inputs pass on {', '.join(measured)}"))
    elif ran_reference:
        # each dtype's reference inputs ran and failed on NaN or ±inf (filed above): its first
        # failing sample hides the other edge values' answers (review 27 read "not measured: no
        # dtype's reference inputs ran" beside a table of their failures)
        items.append({"item": edge, "status": NOT_RUN,
                      "finding": f"not proven on {', '.join(ran_reference)}: the reference "
                                 "inputs fail on NaN or ±inf values (NaN propagation above), "
                                 "which hides the other edge values' answers"})
    else:
        items.append({"item": edge, "status": "todo",
                      "finding": "not measured: no dtype's reference inputs ran"})
    shapes = [r for r in results if r.shapes]
    ran = [d for r in shapes for d in r.dtypes if d.outcome != SKIP and d.samples]
    bad = [f"{r.op} {d.dtype}: {d.message}" for r in shapes for d in r.dtypes
           if d.outcome not in (PASS, SKIP)]
    names = shapes[0].shapes if shapes else []
    dtypes = sorted({d.dtype for d in ran})
    if not ran and not bad:
        # nothing measured is no "ok": it said "[x] ... no shapes ran"
        why = sorted({d.message for r in shapes for d in r.dtypes if d.message})
        items.append({"item": "shapes and dtypes Metal kernels break on", "status": NOT_RUN,
                      "finding": "not run: no shape sample reached a kernel"
                                 + (f" ({'; '.join(why)})" if why else "")})
    elif bad or device in RUNS_CHECKOUT_STRIDED:
        items.append(_item("shapes and dtypes Metal kernels break on", bad,
                           f"{', '.join(names)} pass on {', '.join(dtypes)} (on {device}: the "
                           "checkout's kernels, views through their strided entry point)"))
    else:
        # passed, but not through the checkout's strided kernels: unticked, with where they run
        ops = sorted({r.op for r in shapes})
        items.append({"item": "shapes and dtypes Metal kernels break on", "status": "todo",
                      "finding": f"the functors pass {', '.join(names)} on {', '.join(dtypes)} "
                                 f"through porter's own kernel loop ({device}); the checkout's "
                                 "strided kernels (c10/metal/indexing.h) did not run here: on a "
                                 "Mac, run " + ", ".join(f"`porter test {op} --device mps`" for op in ops)})
    items.append({"item": "before/after benchmark", "status": "todo",
                  "finding": "not measured here: on a Mac, run "
                             + ", ".join(f"`porter bench {f.op} --format markdown`" for f in facts)
                             + " and paste the tables (no Apple hardware has run porter's "
                             "benchmark yet)"})
    return items


def _nan_involved(d) -> bool:
    """Whether a failing dtype's first mismatching elements hold a NaN (an input, the CPU's or
    the device's value): a NaN-propagation failure, not an edge value's."""
    return any("nan" in str(v).lower() for row in d.mismatches
               for v in (*row.get("inputs", {}).values(), row.get("cpu"), row.get("device")))


def _first_row(d) -> str:
    """' (inputs ..., cpu X, device Y)' of a failing dtype's first mismatching element."""
    if not d.mismatches:
        return ""
    row = d.mismatches[0]
    inputs = ", ".join(f"{k} {v}" for k, v in row.get("inputs", {}).items())
    return f" ({inputs + ': ' if inputs else ''}cpu {row.get('cpu')}, device {row.get('device')})"


def _item(name: str, problems: list[str], clean: str) -> dict:
    if problems:
        return {"item": name, "status": "fail", "finding": "; ".join(problems)}
    return {"item": name, "status": "ok", "finding": clean}


# --- Markdown ---------------------------------------------------------------------------------

MARK = {"ok": "[x]", "fail": "[ ]", "todo": "[ ]", NOT_RUN: "[ ]", NOT_APPLICABLE: "(n/a)"}
ICON = {PASS: "pass", "fail": "**fail**", "xfail": "xfail", "xpass": "**xpass**", "skip": "skip", None: "-"}


def markdown(data: dict) -> str:
    ops = data["ops"]
    lines = [f"[MPS] Move {_join([f'`{op}`' for op in ops])} to Metal", ""]
    moved = []
    for m in data["moved"]:
        kernels = "; ".join(f"`{k['name']}_functor` in `{_short(k['path'])}` "
                            f"({', '.join(_dtype_list(k['dtypes']))})" for k in m["kernels"])
        if m["was_mpsgraph"]:
            old = ", ".join(f"`{r['what']}` ({_short(r['path'])})" for r in m["mpsgraph_removed"])
            moved.append(f"- `{m['op']}`: from MPSGraph ({old}, deleted) to a Metal kernel: {kernels}.")
        else:
            moved.append(f"- `{m['op']}`: had no MPS kernel; now a Metal kernel: {kernels}.")
        for y in m["yaml"]:
            moved.append(f"  - yaml `{y['entry']}`: `{y['before'] or 'no MPS row'}` -> `{y['after'] or 'no MPS row'}`")
        for h in m["host"]:
            moved.append(f"  - host: `{h}`")
    lines += ["Moves the ops off the MPSGraph path (or off the CPU fallback) onto native Metal "
              "functors run through TensorIterator, the way upstream's `*Kernel.metal` ops are.", "",
              "### What moved", *moved, "", "### Files", "",
              "| file | change | + | - |", "|---|---|---|---|"]
    for f in data["files"]:
        lines.append(f"| `{f['path']}` | {f['status']} | {f['added']} | {f['removed']} |")
    lines += ["", "### Test plan", "",
              f"Emulated on Linux by porter: `{data['verdict_source']}`. Upstream's samples are what "
              "`TestConsistency.test_output_match` sends; the reference inputs add ±0, ±inf, NaN and "
              "each dtype's limits; the shapes are "
              + (", ".join(data["shapes"]) if data["shapes"] else "none")
              + " (views kept, so non-contiguous ones run the strided path as the emulator models it).",
              "", "| OpInfo | dtype | upstream samples | reference inputs | shapes | upstream test |",
              "|---|---|---|---|---|---|"]
    for v in data["verdicts"]:
        cells = [f"{ICON.get(v[k], v[k])} ({v[k + '_count']})" if v[k] else "-" for k in KINDS]
        test = f"`{v['upstream_test']}`" if v["upstream_test"] else "none on a Mac (not a grad dtype)"
        lines.append(f"| `{v['opinfo']}` | {v['dtype']} | {' | '.join(cells)} | {test} |")
    failing = [v for v in data["verdicts"] if v["message"]]
    for v in failing:
        lines.append(f"\n> {v['opinfo']} {v['dtype']}: {v['message']}")
    lines += ["", "On a Mac (the tests this PR turns on):", "", "```sh", *data["commands"], "```"]
    if data["removed_xfails"] or data["removed_decorators"]:
        lines += ["", "Removed expectations (each now expected to pass on MPS):"]
        for e in data["removed_xfails"]:
            lines.append(f"- `{e['text']}` ({_short(e['where'])})")
        for e in data["removed_decorators"]:
            lines.append(f"- `{e['text']}` ({_short(e['where'])}:{e['line']}): `{e['command']}`")
    if data["kept_decorators"]:
        lines += ["", "Kept (not about the missing kernel; check them on a Mac):"]
        for e in data["kept_decorators"]:
            lines.append(f"- `{e['text']}`: `{e['command']}`")
    lines += ["", "### Review checklist", ""]
    for item in data["checklist"]:
        lines.append(f"- {MARK[item['status']]} {item['item']}: {item['finding']}")
    lines += ["", f"Generated by `porter pr {' '.join(ops)}` against `{data['base']}`, testing "
                  f"commit `{data['commit'][:12]}` as checked out apart from the working tree."]
    lines += [f"\n> warning: {w}" for w in data.get("warnings", [])]
    return "\n".join(lines) + "\n"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _dtype_list(pairs) -> list[str]:
    """`float32->float32` as `float32`; a changed output type stays written out."""
    return [a if a == b else f"{a}->{b}" for a, b in (p.split("->") for p in pairs)]
