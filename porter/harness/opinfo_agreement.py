"""Do the OpInfos a test run imports say what the checkout's OpInfo source says?

Planning (`porter new-op`, `migrate-from-mpsgraph`) reads the checkout's OpInfo definitions
without importing them; a test imports an op database: the checkout's torch when it is
importable, else the installed torch's. Where the two differ for a tested op (its MPS dtypes),
or the checkout has no OpInfo for it, the run says so: the port was planned from one source
and tested against another. Where the checkout's OpInfo files are the op database's own,
byte for byte, nothing can differ and they are not read.
"""

from __future__ import annotations

import ast
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
        # a dtype the checkout sends and this run does not: unproven() says it
        if planned and planned != sent and planned <= sent:
            where = f"{opinfos[0].path}:{opinfos[0].line}"
            found.append(f"the checkout's OpInfo for {name} ({where}) sends "
                         f"{', '.join(sorted(planned))} on MPS, {installed} sends "
                         f"{', '.join(sorted(sent))}: a port registers the checkout's, and a "
                         "dtype it no longer sends is skipped where porter reads both OpInfos "
                         "(a Mac's test_mps.py does not run it)")
    return found


def drop_unsent(checkout, results, db) -> None:
    """Skip, in `results`, the dtypes the checkout's OpInfo stopped sending on MPS (a narrower
    `dtypesIfMPS=` than the tested op database's): a Mac's test_output_match never runs them,
    so they can neither pass nor fail the port (review 31's O03 was red on them). Only what
    the two sources' static readings differ in, both read soundly, is dropped: a dtype the
    reading misses in both stays tested. A wider checkout is unproven()'s."""
    if checkout is None or getattr(db, "source", "") == "checkout":
        return
    torch_path = getattr(db, "torch_path", None)
    if not torch_path or same_sources(checkout, torch_path):
        return
    from porter.harness.verdicts import SKIP, DtypeResult

    installed = Checkout(Path(torch_path).parent)
    gone: dict[str, tuple] = {}
    for r in results:
        if getattr(r, "via", None):
            continue        # a backward op's dtypes are its forward OpInfo's gradient ones
        if r.name not in gone:
            gone[r.name] = _dropped(checkout, installed, r.name)
        dropped, where = gone[r.name]
        for d in r.dtypes:
            if d.dtype in dropped and d.outcome != SKIP:
                # as a Mac reports it: not run (what this run measured would read as a verdict)
                vars(d).update(vars(DtypeResult(
                    d.dtype, SKIP, expected_by=[where], seconds=d.seconds,
                    message=(f"not sent: the checkout's OpInfo for {r.name} ({where}) no longer "
                             "sends these on MPS, so a Mac's test_mps.py does not run them"))))


def _dropped(checkout, installed, name: str) -> tuple[set, str]:
    """(dtypes the installed OpInfo of `name` sends on MPS and the checkout's does not, where)."""
    from porter.source.opinfo_source import for_op, mps_dtypes

    op = name.removeprefix("nn.functional.").replace(".", "_", 1)
    mine, _ = for_op(checkout, op)
    theirs, _ = for_op(installed, op)
    if not mine or not theirs or _unreadable_dtypes(mine, installed) is not None:
        return set(), ""
    if any(k.arg is None for o in theirs for k in o.node.keywords):
        return set(), ""
    if any(o.dtypes(k) is None for o in theirs for k in _DTYPE_KEYWORDS if k in o.kwargs):
        return set(), ""
    return set(mps_dtypes(theirs)) - set(mps_dtypes(mine)), f"{mine[0].path}:{mine[0].line}"


def unproven(checkout, results, db) -> list[str]:
    """The tested OpInfos whose decorators that can act on test_output_match on MPS (an
    expectedFailure, a skip, a tolerance) differ between the checkout and the op database:
    a Mac's test_mps.py applies the checkout's, this run the database's. Not proven, so never
    green: a checkout's new `expectedFailure` for the op makes a Mac report an unexpected
    success, a tolerance it drops makes a Mac strict where the run is loose."""
    if checkout is None or getattr(db, "source", "") == "checkout":
        return []
    torch_path = getattr(db, "torch_path", None)
    if not torch_path or same_sources(checkout, torch_path):
        return []
    from porter.harness.opinfo_reach import first_difference
    from porter.source.opinfo_source import find

    installed = Checkout(Path(torch_path).parent)
    tested = {(r.name, getattr(r, "variant", "") or "") for r in results
              if not getattr(r, "via", None)}
    # a backward op is tested through its forward OpInfo (`via`: "FULL_NAME (file:line: ...)"),
    # whose test_output_grad_match decorators are the ones that act on it
    for r in results:
        if getattr(r, "via", None):
            full = r.via.split(" (", 1)[0]
            if find(checkout, {full}):
                tested.add((full, ""))
            elif "." in full:
                tested.add(tuple(full.rsplit(".", 1)))
    found: list[str] = []
    found += _untested_dtypes(checkout, results, db)
    found += _module_code_differs(checkout, installed, db)
    for name in sorted({n for n, _ in tested}):
        # a variant the checkout adds is a test a Mac runs and this run does not (review 32's
        # D20: `heaviside` gained a `subnormal` variant, every dtype of it red on a Mac)
        theirs = {o.variant_test_name for o in find(installed, {name}) if not o.is_ref}
        for o in find(checkout, {name}):
            if not o.is_ref and theirs and o.variant_test_name not in theirs:
                found.append(f"the checkout's OpInfo file adds a variant of {name}, "
                             f"'{o.variant_test_name}' ({o.path}:{o.line}), which the installed "
                             f"torch {db.torch_version} lacks: a Mac runs its test_output_match, "
                             "this run does not (build the checkout's torch, or install one whose "
                             "OpInfo is the checkout's)")
                break
    for name, variant in sorted(tested):
        mine = [o for o in find(checkout, {name}) if not o.is_ref and o.variant_test_name == variant]
        theirs = [o for o in find(installed, {name}) if not o.is_ref
                  and o.variant_test_name == variant]
        if not mine or not theirs:
            continue        # no OpInfo in the checkout: notes() says so
        label = name + (f" ({variant})" if variant else "")
        ours, wheel = mps_decorators(mine[0].node), mps_decorators(theirs[0].node)
        if [d for d, _ in ours] == [d for d, _ in wheel]:
            reached = first_difference(checkout, installed, mine[0], theirs[0])
            if reached:
                found.append(f"the checkout's OpInfo for {label} ({mine[0].path}:{mine[0].line}) "
                             f"is not the installed torch {db.torch_version}'s: {reached}; a Mac "
                             "tests with the checkout's samples and rules, this run with the "
                             "installed one's (build the checkout's torch, or install one whose "
                             "OpInfo is the checkout's)")
            continue
        extra = [text for d, text in ours if d not in dict(wheel)]
        gone = [text for d, text in wheel if d not in dict(ours)]
        what = (f"the checkout adds `{_short(extra[0])}`" if extra else
                f"the checkout lacks the installed one's `{_short(gone[0])}`")
        found.append(f"the checkout's OpInfo for {label} ({mine[0].path}:{mine[0].line}) and the "
                     f"installed torch {db.torch_version}'s differ in a decorator that acts on "
                     f"test_output_match on MPS ({what}): a Mac applies the checkout's, this run "
                     "the installed one's (build the checkout's torch, or install one whose "
                     "OpInfo is the checkout's)")
    return found


def _module_code_differs(checkout: Checkout, installed: Checkout, db) -> list[str]:
    """The first module-level statement of a checkout's OpInfo file that the installed
    torch's same file lacks, other than a definition (a sample function is read through the
    OpInfo that names it) and an import: code that runs as the op database is imported, and may
    change any entry (review 32's D05b: a loop giving heaviside another sample function)."""
    import hashlib
    import json

    from porter.runtime.cache_dir import cache_dir
    from porter.runtime.whole_file import write_whole
    for rel in opinfo_files(checkout):
        try:
            text = checkout.read(rel)
        except (OSError, ValueError):
            continue
        try:
            other = installed.read(rel)
        except (OSError, ValueError):
            other = ""
        # two parses of the 1.3 MB op database cost seconds: the answer is kept by content
        digest = hashlib.sha256(b"module-code-2\0" + text.encode() + b"\0" + other.encode())
        kept = cache_dir("opinfo") / f"module-{digest.hexdigest()[:32]}.json"
        try:
            answer = json.loads(kept.read_text())
        except (OSError, ValueError):
            answer = _first_new_statement(text, other)
            try:
                write_whole(kept, json.dumps(answer))
            except OSError:
                pass
        if answer:
            line, code = answer
            return [f"{rel}:{line}: the checkout's OpInfo file runs `{code}` at import, which "
                    f"the installed torch {db.torch_version}'s does not: it may change any "
                    "entry a Mac tests (build the checkout's torch, or install one whose OpInfo "
                    "is the checkout's)"]
    return []


def _first_new_statement(text: str, other: str) -> list | None:
    """[line, code] of `text`'s first module statement `other` lacks (see
    _module_code_differs), or None."""
    try:
        mine = ast.parse(text)
    except SyntaxError:
        return None             # the OpInfo reader says so
    try:
        theirs = ast.parse(other)
    except SyntaxError:
        theirs = ast.Module(body=[], type_ignores=[])
    known = {_code_of(s) for s in theirs.body}
    for s in mine.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                          ast.ImportFrom)):
            continue
        if _code_of(s) in known or _op_list(s) or _imports_only(s):
            continue            # the OpInfos themselves are compared one by one
        return [s.lineno, ast.unparse(s).splitlines()[0][:70]]
    return None


def _code_of(stmt: ast.stmt) -> str:
    return ast.dump(stmt, annotate_fields=False)


def _op_list(stmt: ast.stmt) -> bool:
    """`op_db: list[OpInfo] = [...]`, `op_db += [...]` and the like: a list of OpInfo calls bound
    to a name or added to one, or another module's list added to one (`op_db +=
    opinfo_definitions.op_db`): entries the OpInfo reader finds and compares one by one."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
    if isinstance(stmt, ast.AugAssign) and (not isinstance(stmt.op, ast.Add)
                                            or not isinstance(stmt.target, ast.Name)):
        return False
    if isinstance(stmt, ast.AugAssign) and isinstance(value, (ast.Name, ast.Attribute)):
        return True
    return isinstance(value, (ast.List, ast.Tuple)) and bool(value.elts) and all(
        isinstance(e, ast.Call) or isinstance(e, ast.Starred) for e in value.elts)


def _imports_only(stmt: ast.stmt) -> bool:
    """An `if`/`try` that only imports (the miniature's `if TEST_SCIPY: import scipy.special`)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(stmt, ast.If):
        return all(map(_imports_only, stmt.body + stmt.orelse))
    if isinstance(stmt, ast.Try):
        return all(map(_imports_only, stmt.body + stmt.orelse + stmt.finalbody
                       + [s for h in stmt.handlers for s in h.body]))
    return False


def _untested_dtypes(checkout, results, db) -> list[str]:
    """The dtypes the checkout's OpInfo sends on MPS that this run (the op database's OpInfo)
    did not test: a Mac's test_mps.py runs them."""
    from porter.source.opinfo_source import for_op, mps_dtypes

    sent: dict[str, set[str]] = {}
    for r in results:
        if not (getattr(r, "reference", False) or getattr(r, "via", None)):
            sent.setdefault(r.name, set()).update(r.supported)
    found = []
    installed = Checkout(Path(db.torch_path).parent) if getattr(db, "torch_path", None) else None
    for name, tested in sent.items():
        opinfos, _ = for_op(checkout, name.removeprefix("nn.functional.").replace(".", "_", 1))
        unread = _unreadable_dtypes(opinfos, installed)
        if unread:
            found.append(f"the checkout's OpInfo for {name} ({opinfos[0].path}:{opinfos[0].line}) "
                         f"spells the dtypes it sends on MPS as porter cannot read ({unread}), "
                         f"unlike the installed torch {db.torch_version}'s: a Mac may test "
                         "dtypes this run did not (write them as `dtypes=` or `dtypesIfMPS=` "
                         "literals, or build the checkout's torch)")
            continue
        # complex ones too: a Mac tests a complex dtype the checkout's OpInfo sends, and one
        # the op is listed for in SUPPORTED_COMPLEX_OPS runs (review 21's E04c was green)
        planned = set(mps_dtypes(opinfos))
        missing = sorted(planned - tested) if opinfos else []
        if missing:
            found.append(f"the checkout's OpInfo for {name} ({opinfos[0].path}:{opinfos[0].line}) "
                         f"sends {', '.join(missing)} on MPS, which the installed torch "
                         f"{db.torch_version}'s does not, so this run did not test "
                         f"{'it' if len(missing) == 1 else 'them'}: a Mac does (build the "
                         "checkout's torch, or install one whose OpInfo is the checkout's)")
    return found


_DTYPE_KEYWORDS = ("dtypes", "dtypesIfMPS")


def _unreadable_dtypes(opinfos, installed) -> str | None:
    """What keeps the checkout's MPS dtypes from a static reading, where they are not spelled
    as the installed torch's OpInfo spells them: a `**` splat (it may hold `dtypesIfMPS`), or a
    dtypes expression porter cannot evaluate. None when the reading is sound."""
    from porter.source.opinfo_source import find

    def spelled(o):
        return [ast.dump(k) for k in o.node.keywords if k.arg is None or k.arg in _DTYPE_KEYWORDS]

    for o in opinfos:
        twins = [t for t in find(installed, {o.name}) if not t.is_ref
                 and t.variant_test_name == o.variant_test_name] if installed else []
        if twins and spelled(twins[0]) == spelled(o):
            continue
        if any(k.arg is None for k in o.node.keywords):
            return "a `**` argument"
        for key in _DTYPE_KEYWORDS:
            if key in o.kwargs and o.dtypes(key) is None:
                return f"`{key}={ast.unparse(o.kwargs[key])[:60]}`"
    return None


# a decorator that names a device other than MPS acts on that device's tests only (the words
# porter.harness.opinfo_run reads at run time: skipCPUIfNoLapack, skipCUDAIfNoMagma)
_OTHER_DEVICE = ("cpu", "cuda", "xpu", "rocm", "magma", "lapack", "cusolver", "tf32", "meta",
                 "hpu", "mtia", "xla", "mkl")


def mps_decorators(call: ast.Call) -> list[tuple[str, str]]:
    """The decorators of an OpInfo call that can act on TestConsistency's test_output_match
    on MPS, as (`ast.dump`, source) pairs, sorted: every DecorateInfo whose class, test and
    device are that test's or not literals, and every bare decorator that names no other
    device."""
    out = []
    for kw in call.keywords:
        if kw.arg not in ("decorators", "skips"):
            continue
        items = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
        for e in items:
            if isinstance(e, ast.Call) and _callee(e) == "DecorateInfo":
                kws = {k.arg: k.value for k in e.keywords}
                place = [kws.get(k, e.args[i] if len(e.args) > i else None)
                         for i, k in ((1, "cls_name"), (2, "test_name"), (3, "device_type"))]
                allowed = ({"TestConsistency"}, {"test_output_match", "test_output_grad_match"},
                           {"mps"})
                if any(isinstance(n, ast.Constant) and n.value is not None and n.value not in ok
                       for n, ok in zip(place, allowed)):
                    continue
            elif any(w in _callee(e).lower() for w in _OTHER_DEVICE):
                continue
            out.append((ast.dump(e), ast.unparse(e)))
    return sorted(out)


def _callee(node: ast.AST) -> str:
    while isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _short(text: str) -> str:
    """A decorator's source cut to a line."""
    return text if len(text) <= 120 else text[:117] + "..."


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
