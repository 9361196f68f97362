"""Plan the move of an op from MPSGraph to a native Metal kernel: `migrate-from-mpsgraph`'s plan step.

On top of new-op's `plan_port` (functor, registration, host stub, expectations) a migration
1. finds the MPSGraph implementation in `mps/operations/*.mm` in any of its shapes
   (porter.source.mpsgraph_scan), including the hidden `REGISTER_MPS_UNARY_STUB` behind a shared row;
2. routes MPS through the CPU/CUDA structured kernel on every overload row (edits.dispatch_rows);
3. deletes the implementation, the static helpers only it used, its now-unused
   `<op>_native.h` include (edits.mpsgraph) and the op's MPSFallback.mm lines;
4. takes the functor body from `--body`, the CPU lambda, or the MPSGraph selector (porter.port.selectors).

A function that calls a deleted symbol directly would no longer compile: porter refuses and
names it. Calls through the per-backend API (`at::mps::sign_outf`) keep compiling, because MPS
still has a kernel for the op after the migration (the shared one): they are reported only.
Nothing is written here.
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.source import native_yaml
from porter.port import enum_port, joint, selectors
from porter.port import validate
from porter.port.body import translate_lambda
from porter.source.c10_metal import available_functions
from porter.apply.changes import ChangeSet
from porter.source.cpp_scan import line_of
from porter.port.edits import mpsgraph as graph_edit
from porter.port.edits import dispatch_rows as yaml_edit
from porter.source.dtypes import has_integer
from porter.errors import Incomplete, PorterError
from porter.source.metal_scan import MetalFile
from porter.source.mpsgraph_scan import STUB, Definition, HostSource, source_of
from porter.port.resolve import MPSGRAPH, NATIVE, TERNARY, UNDEFINED, OpSpec, defined_mps_functions, resolve
from porter.port.functor import SKELETON, functor_params
from porter.port.plan import Plan, plan_port

FROM_SELECTOR = "mpsgraph-selector"


class Migration(Plan):
    pass


def plan_migration(checkout: co.Checkout, op: str, body: str | None = None,
                   validator=None, complex_body: str | None = None,
                   in_place: bool = False) -> Migration:
    """The edits that move `op` off MPSGraph; with them, where its shared function runs another
    op's stub that has no MPS kernel (sgn_out: sign_stub for real inputs), that op's port first
    (porter.port.joint), in the same ChangeSet."""
    try:
        return _plan_migration(checkout, op, body, validator, complex_body, in_place)
    except PorterError as err:
        first = getattr(err, "prerequisite", None)
        if not first or isinstance(checkout, joint.Overlay):
            raise
        refusal = err

    def plan_first(base):
        spec = resolve(base, first)
        if spec.state == NATIVE:
            raise PorterError(f"{first} is native already, yet its stub has no MPS kernel")
        # as its own command would: off MPSGraph, or new-op where it has no MPS code
        return _plan_migration(base, first, None, validator) if spec.state == MPSGRAPH \
            else plan_port(base, spec, validator=validator)

    return joint.with_prerequisite(checkout, op.strip(), first, refusal, plan_first,
                                   lambda overlay: _plan_migration(overlay, op, body, validator,
                                                                   complex_body, in_place))


def _plan_migration(checkout: co.Checkout, op: str, body: str | None = None,
                    validator=None, complex_body: str | None = None,
                    in_place: bool = False) -> Migration:
    if enum_port.is_enum_op(checkout, op.strip()):
        # a str argument that picks the kernel (gelu): one functor per value, chosen in the host;
        # the port keeps the op's own MPS impl, so --in-place is what it does anyway
        given = [f for f, v in (("--body", body), ("--complex-body", complex_body)) if v is not None]
        if given:
            raise PorterError(f"{' and '.join(given)} does not apply to '{op.strip()}': its kernels are "
                              "one per value of its str argument, each translated from its CPU "
                              "kernel's branch for that value; nothing was written",
                              hint=f"rerun without {given[0]}: porter migrate-from-mpsgraph {op.strip()}")
        return enum_port.plan_enum_port(checkout, op.strip(), validator)
    spec = _resolve(checkout, op, in_place)
    if spec.in_place:
        return _plan_in_place(checkout, spec, body, validator, complex_body)
    op = spec.op
    rows = [r for e in spec.entries for r in yaml_edit.mps_specific_rows(e)]
    yaml_text = checkout.read(co.NATIVE_YAML)
    names = {r.kernel for r in rows} | _leftover_names(spec, yaml_text)
    stub_line = re.compile(rf"REGISTER_MPS_UNARY_STUB\(\s*{re.escape(op)}\s*,")
    hosts = {}
    for rel in checkout.glob(co.OPERATIONS, "*.mm"):
        text = checkout.read(rel)
        # A real checkout has ~100 host files: only those naming the op are scanned.
        if any(n in text for n in names) or stub_line.search(text):
            hosts[rel] = source_of(text)
    found = {rel: host.named(names) + host.stubs_of(op) for rel, host in hosts.items()}
    found = {rel: sorted(defs, key=lambda d: d.start) for rel, defs in found.items() if defs}
    migration = Migration(spec, ChangeSet(checkout.root))
    if not rows and not found and not any(e.mps_rows() for e in spec.entries):
        raise PorterError(f"'{op}' has no MPS implementation to migrate", path=co.NATIVE_YAML,
                          line=spec.entries[0].lineno, hint=f"use porter new-op {op}")
    if not rows and not found and spec.state == NATIVE:
        # nothing of MPSGraph left; new-op's checks are new-op's job. A body given now is not
        # written anywhere: say so, or a rerun meant to fix a wrong body reads as done
        given = [f for f, v in (("--body", body), ("--complex-body", complex_body)) if v is not None]
        if given:
            # the functor may live beside its family (ActivationKernel.metal), not in the
            # stub's default file: name the file that holds it
            where = next((rel for rel in checkout.glob(co.KERNELS, "*.metal")
                          if f"struct {spec.kernel}_functor" in checkout.read(rel)), spec.metal_path)
            migration.notes.append(f"{' and '.join(given)} not applied: '{op}' is already ported "
                                   f"({spec.kernel}_functor in {where} is its kernel); to "
                                   "change the body, edit that functor, or revert the port "
                                   "(git checkout) and rerun")
        return migration
    if not rows and not found:
        # MPS already shares the CPU/CUDA kernel but no Metal kernel is registered: a port
        # left half done (a killed migration never leaves this: it deletes the old impl last)
        shared = next(r for e in spec.entries for r in e.mps_rows())
        raise PorterError(f"'{op}' has no MPSGraph implementation to migrate: its MPS row already "
                          f"runs {shared.kernel}, but no host file registers a Metal kernel for "
                          f"{spec.stub.name}", path=co.NATIVE_YAML, line=shared.lineno,
                          hint=f"porter new-op {op} adds the missing kernel")
    metal = [(rel, d) for rel, defs in found.items() for d in defs if hosts[rel].is_metal(d)]
    if metal and len(metal) == sum(len(d) for d in found.values()):
        rel, d = metal[0]
        migration.notes.append(f"{rel}:{d.line}: {d.name} already runs a Metal kernel "
                               "(an MPS impl behind its own yaml row, which MPSGraph no longer "
                               "builds): nothing to migrate")
        return migration
    defined = {d.name for defs in found.values() for d in defs}
    for r in rows:
        if r.kernel not in defined:
            for rel, host in hosts.items():
                at = host.uses(r.kernel)
                if at:      # named there, but not in a shape porter can delimit: never guess
                    raise PorterError(f"{r.kernel} appears here, but not as a definition porter can "
                                      "delimit (TORCH_IMPL_FUNC, CREATE_MPS_*, Tensor& fn(...) {...}); "
                                      "nothing was written", path=rel, line=line_of(host.text, at[0]),
                                      hint="delete it by hand, then rerun to finish the port")
            migration.notes.append(f"{co.NATIVE_YAML}:{r.lineno}: MPS row names {r.kernel}, which no "
                                   f"{co.OPERATIONS}/*.mm defines; only the row changes")
    _refuse_direct_callers(checkout, hosts, found, op)
    cs = migration.changes
    new_entries = _plan_yaml(spec, yaml_text, cs)
    header_kernels = {r.kernel for e in spec.entries for r in e.dispatch}
    for rel, defs in found.items():
        text = hosts[rel].text
        new, removed = graph_edit.delete_definitions(text, defs, op, header_kernels)
        _check_balanced(rel, text, new)
        cs.set(rel, text, new)
        migration.removed += [{"path": rel, "line": r.line, "what": r.what, "name": r.name}
                              for r in removed]
        migration.notes += _unused_macros(rel, new, defs)
    if found:       # on the edited texts, so that the lines cited are those the user will see
        edited = {rel: source_of(cs.current(rel, checkout.read)) for rel in found}
        migration.notes += _dispatcher_callers(checkout, {**hosts, **edited}, op)
        migration.notes += _stale_mentions(checkout, {**hosts, **edited},
                                           {d.name for defs in found.values() for d in defs})
    if checkout.exists(co.MPS_FALLBACK):
        text = checkout.read(co.MPS_FALLBACK)
        new, removed = graph_edit.drop_fallbacks(text, op)
        if removed:
            cs.set(co.MPS_FALLBACK, text, new)
            migration.removed += [{"path": co.MPS_FALLBACK, "line": r.line, "what": r.what, "name": r.name}
                                  for r in removed]
    port_spec = spec._replace(entries=new_entries,
                              backend_entries=tuple(e for e in new_entries if e.dense_rows()))
    chosen = None
    selector_notes: list[str] = []
    # a ternary functor comes from the CPU lambda or --body (porter.port.ternary_port): an
    # MPSGraph selector is one operation of its several
    if body is None and spec.kind != TERNARY:
        body, chosen = _selector_body(checkout, port_spec, hosts, found, cs, selector_notes)
    # the port's results (functor, gaps, registrations, dtypes left out) land in the migration
    plan_port(checkout, port_spec, body, validator=validator, complex_body=complex_body,
              into=migration)
    if migration.functor is None or migration.functor.origin == SKELETON:
        # "no body from MPSGraph either" only where no source gave one: after threshold's
        # body came from its CPU kernel the note read as a failure of a port that worked
        migration.notes += selector_notes
    for rel in found:       # a re-run after a kill reads the functor body from the old impl
        cs.apply_last(rel)
    if chosen and migration.functor is not None:
        migration.functor = migration.functor._replace(origin=FROM_SELECTOR, detail=chosen)
    _validate_yaml(checkout, spec, cs, validator)
    return migration


def _plan_in_place(checkout, spec: OpSpec, body, validator, complex_body) -> Migration:
    """Keep the op's own MPS impl and make its body run the Metal kernel (resolve's InPlace)."""
    place = spec.in_place
    migration = Migration(spec, ChangeSet(checkout.root))
    if spec.state == NATIVE:
        migration.notes.append(f"{place.path}:{place.line}: {place.function} already runs a Metal "
                               "kernel: nothing to migrate")
        return migration
    plan_port(checkout, spec, body, validator=validator, complex_body=complex_body, into=migration)
    if migration.functor is not None and migration.functor.origin == SKELETON:
        params = " and ".join(functor_params(spec))
        raise Incomplete(f"cannot port '{spec.op}' in place without a functor body "
                         f"({migration.functor.detail}): porter never replaces a working MPSGraph "
                         "implementation by a skeleton; nothing was written",
                         path=place.path, line=place.line,
                         hint=f"rerun with --body EXPR (in {params})")
    how = ("--in-place" if place.reason == "--in-place"
           else f"in place, because the shared row cannot be used: {place.reason}")
    # first, before the port's own notes
    migration.notes.insert(0, f"{place.path}:{place.line}: {how}; MPS keeps {place.function}, whose "
                              "MPSGraph body now runs the Metal kernel on its TensorIterator")
    return migration


HAND_PORT = ("port it by hand: an MPS function that runs a Metal kernel, named by its own MPS row "
             "in native_functions.yaml")


def _resolve(checkout: co.Checkout, op: str, in_place: bool = False) -> OpSpec:
    try:
        return resolve(checkout, op, in_place)
    except PorterError as err:
        name = op.strip()
        name = name.replace(".", "_", 1) if name.startswith(("special.", "linalg.", "fft.")) else name
        if not re.fullmatch(r"\w+", name or "-"):
            raise
        fam = native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {name, name + "_"})
        own = [r for e in fam for r in yaml_edit.mps_specific_rows(e)]
        if not own:
            raise
        # name only what the checkout has: an MPS function a host file defines, else the yaml
        # row that names a function no host file defines (torch 2.13's add_out_mps, here)
        named = list(dict.fromkeys(r.kernel for r in own))
        defined = defined_mps_functions(checkout, named)
        missing = [k for k in named if k not in defined]
        where = ", ".join(k for k in named if k in defined)
        if missing:
            where += ("; " if where else "") + f"its MPS row names {', '.join(missing)}, {UNDEFINED}"
        wrapped = PorterError(f"cannot migrate '{name}' off MPSGraph ({where}): {err.message}",
                              path=err.path, line=err.line, hint=err.hint or HAND_PORT)
        wrapped.prerequisite = getattr(err, "prerequisite", None)
        raise wrapped from None


def leftovers(checkout: co.Checkout, spec: OpSpec) -> list[tuple[str, Definition]]:
    """MPSGraph definitions of a half-applied migration (the yaml already shares the CPU/CUDA
    kernel, the old `<kernel>_mps` implementation is still there), as (host file, definition)."""
    names = _leftover_names(spec, checkout.read(co.NATIVE_YAML))
    out = []
    for rel in checkout.glob(co.OPERATIONS, "*.mm"):
        text = checkout.read(rel)
        if any(n in text for n in names):
            out += [(rel, d) for d in source_of(text).named(names)]
    return out


def _leftover_names(spec: OpSpec, yaml_text: str) -> set[str]:
    """`<kernel>_mps` functions a half-done migration may have left behind: named by no row."""
    names = {f"{r.kernel}_mps" for e in spec.entries for r in e.dense_rows()}
    return {n for n in names if not re.search(rf":\s*{re.escape(n)}\s*$", yaml_text, re.M)}


def _plan_yaml(spec: OpSpec, old: str, cs: ChangeSet) -> tuple:
    try:
        new = yaml_edit.share_mps(old, spec.entries)
    except yaml_edit.NoSharedKernel as err:
        own = ", ".join(r.kernel for r in yaml_edit.mps_specific_rows(err.entry))
        raise PorterError(f"{err}: MPS keeps {own}", path=co.NATIVE_YAML, line=err.entry.lineno,
                          hint=HAND_PORT) from None
    cs.set(co.NATIVE_YAML, old, new)      # listed first, "identical" for a stub-only op
    if new == old:
        return spec.entries
    return tuple(native_yaml.entries_named(new, {spec.op, spec.op + "_"}))


def _validate_yaml(checkout, spec: OpSpec, cs: ChangeSet, validator) -> None:
    """torchgen checks the rewritten entries; last, so that its warm-up overlaps planning."""
    change = cs.changes.get(co.NATIVE_YAML)
    if change is None or change.old == change.new:
        return
    changed = {e.full_name for e in spec.entries if yaml_edit.mps_specific_rows(e)}
    tags = checkout.read(co.TAGS_YAML) if checkout.exists(co.TAGS_YAML) else None
    validate.yaml_entries(change.new, changed, tags, validator)


def _deleted_symbols(d: Definition, op: str) -> list[str]:
    if d.shape == STUB:
        return [f"mps_{op}_kernel"]
    return [d.name, f"structured_{d.name}"]


def _mps_sources(checkout: co.Checkout, hosts: dict[str, HostSource]) -> dict[str, HostSource]:
    """Every C++/ObjC source under native/mps (the host files already read are reused)."""
    out = dict(hosts)
    for pattern in ("**/*.mm", "**/*.h", "**/*.cpp"):
        for rel in checkout.glob(co.MPS, pattern):
            if rel not in out:
                out[rel] = source_of(checkout.read(rel))
    return out


def _refuse_direct_callers(checkout, hosts, found: dict[str, list[Definition]], op: str) -> None:
    sources = None
    for rel, defs in found.items():
        for d in defs:
            for symbol in _deleted_symbols(d, op):
                sources = sources or _mps_sources(checkout, hosts)
                for src_rel, src in sources.items():
                    if symbol not in src.text:
                        continue
                    deleted = [(x.start, x.end) for x in found.get(src_rel, [])]
                    for pos in src.uses(symbol):
                        if any(a <= pos < b for a, b in deleted):
                            continue
                        caller = src.enclosing(pos)
                        who = caller.name if caller else "code at file scope"
                        raise PorterError(
                            f"cannot delete {d.name} ({rel}:{d.line}): {who} still uses "
                            f"{symbol} directly", path=src_rel, line=line_of(src.text, pos),
                            hint="port or rewrite the caller first; porter changed nothing")


def _dispatcher_callers(checkout, hosts, op: str) -> list[str]:
    """Calls of the op through `at::mps::` left after the deletion: they keep working."""
    pattern = re.compile(rf"\bat::mps::{re.escape(op)}(?:_|_out|_outf)?\s*\(")
    notes = []
    for rel, src in _mps_sources(checkout, hosts).items():
        if f"at::mps::{op}" not in src.text:
            continue
        for m in pattern.finditer(src.mask):
            caller = src.enclosing(m.start())
            who = caller.name if caller else "code at file scope"
            call = m.group().rstrip("( ")
            notes.append(f"{rel}:{line_of(src.text, m.start())}: {who} calls {call}, which keeps "
                         "working and now runs the Metal kernel")
    return notes


def _stale_mentions(checkout, hosts, deleted: set[str]) -> list[str]:
    """Comments that still name a deleted implementation ("(sign_out_mps above)"): said, not
    edited, since they sit in code porter has no reason to touch and only a person can reword."""
    notes = []
    for rel, src in sorted(_mps_sources(checkout, hosts).items()):
        for name in sorted(deleted):
            if name not in src.text:
                continue
            for m in re.finditer(rf"\b{re.escape(name)}\b", src.text):
                if src.mask[m.start()] != " ":
                    continue            # code, not a comment or string: not this note's business
                if not _in_comment(src.text, m.start()):
                    continue
                notes.append(f"{rel}:{line_of(src.text, m.start())}: a comment still mentions "
                             f"{name}, which this migration deletes: reword it")
    return notes


def _in_comment(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    if "//" in text[line_start:pos]:
        return True
    opened, closed = text.rfind("/*", 0, pos), text.rfind("*/", 0, pos)
    return opened > closed


def _check_balanced(rel: str, old: str, new: str) -> None:
    """Whole definitions were cut: if braces or parentheses no longer balance, porter misread
    the file, and writing it would break the build."""
    def balance(text: str) -> tuple[int, int]:
        mask = source_of(text).mask
        return mask.count("{") - mask.count("}"), mask.count("(") - mask.count(")")

    if balance(old) != (0, 0):
        raise PorterError("braces or parentheses do not balance in this file, so porter cannot tell "
                          "where its definitions end; nothing was written", path=rel,
                          hint="fix the file first")
    if balance(new) != (0, 0):
        raise PorterError("deleting the MPSGraph implementation would unbalance braces; nothing was "
                          "written", path=rel, hint="a porter bug: please report it with this file")


def _unused_macros(rel: str, new: str, defs: list[Definition]) -> list[str]:
    notes = []
    source = source_of(new)
    for macro in dict.fromkeys(d.macro for d in defs if d.macro):
        uses = [p for p in source.uses(macro)
                if not new[new.rfind("\n", 0, p) + 1:p].lstrip().startswith("#")]
        if not uses:
            at = re.search(rf"^#define\s+{re.escape(macro)}\b", new, re.M)
            where = f"{rel}:{line_of(new, at.start())}" if at else rel
            notes.append(f"{where}: macro {macro} has no use left; delete it if nothing will need it")
    return notes


def _cpu_lambda_translates(checkout, spec: OpSpec) -> bool:
    """What functor.build decides first, without rendering a template."""
    lam = spec.scalar_lambda
    if lam is None or len(lam.params) != (1 if spec.kind == "unary" else 2):
        return False
    from porter.port.helpers import Library
    library = Library(checkout, lambda: available_functions(checkout))
    return translate_lambda(lam, (), "float", library).statements is not None


def _selector_body(checkout, spec: OpSpec, hosts, found, cs: ChangeSet,
                   notes: list[str]) -> tuple[str | None, str | None]:
    """(body, where it came from) from the MPSGraph selector, when the CPU lambda gives none."""
    metal_text = cs.current(spec.metal_path, checkout.read) if checkout.exists(spec.metal_path) else ""
    if spec.kernel in MetalFile(metal_text).functors:
        return None, None
    if _cpu_lambda_translates(checkout, spec):
        return None, None
    where: dict[str, str] = {}
    for rel, defs in found.items():
        for d in defs:
            for s in hosts[rel].selectors(d):
                where.setdefault(s, f"{rel}:{d.line}")
    has_int = has_integer(spec.dtypes)
    choice = selectors.body_for(list(where), spec.kind, has_int, spec.promotes_int_to_float)
    if choice.expression is None:
        notes.append(f"no functor body from MPSGraph either: {choice.reason}")
        return None, None
    return choice.expression, f"MPSGraph selector {choice.selector} ({where[choice.selector]})"
