"""What is left to port in a checkout: elementwise ops still on MPSGraph, and those with no MPS.

One pass over each source, never a full `resolve` per op (that reads the OpInfo database for
every op, ~0.1 s each): `native_functions.yaml` is scanned once (porter.source.native_yaml), the host
files once (porter.source.mpsgraph_scan), the DispatchStub headers and the CPU sources once each.
Whether porter can port an op without `--body` is the same decision the commands make
(the CPU lambda translates, else one MPSGraph selector maps); integer dtypes are assumed,
since reading each op's OpInfo dtypes is what makes `resolve` slow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from porter.source import checkout as co
from porter.source import native_yaml, op_kind
from porter.port import selectors
from porter.port.body import bool_valued, translate_complex, translate_lambda, truthiness
from porter.source.c10_metal import available_functions, complex_functions
from porter.source.cpu_kernel import float_meta_ops, scalar_lambda, shared_function_stubs
from porter.source.native_definitions import impl_stubs
from porter.port import scalars as scalar_args
from porter.port import complex_helpers, ternary_alpha, ternary_port
from porter.source import host_library
from porter.port.edits.dispatch_rows import mps_specific_rows
from porter.source.mpsgraph_scan import STUB, HostSource
from porter.source.stubs import Stub, declared_stubs

MPSGRAPH, NO_MPS = "mpsgraph", "no-mps"
UNARY, BINARY, OTHER = op_kind.UNARY, op_kind.BINARY, op_kind.OTHER
PAIRS = {UNARY: "UnaryKernel", BINARY: "BinaryKernel"}


@dataclass(frozen=True)
class Candidate:
    op: str
    state: str                 # mpsgraph | no-mps
    shape: str                 # impl | macro | function | stub | row (yaml only) | "" (no-mps)
    kind: str                  # unary | binary | alpha (add's `Scalar alpha`) | scalar (other scalar arguments)
    line: int                  # the .out entry in native_functions.yaml
    automatic: bool            # the command ports it with no flag (verdict "automatic")
    how: str                   # "CPU lambda", "selector acosh", or why not
    files: tuple[str, ...] = field(default=())
    command: str | None = None  # the command that ports it as printed; None where it needs a flag or none does
    backward: bool = False     # a backward op (`.grad_input`): tested through its forward op
    way: str = "shared"        # shared (MPS joins the CPU/CUDA row) | in place (keeps MPS: <op>_out_mps)
    verdict: str = ""          # automatic | --complex-body | --body (a body is all it lacks) | refused


# Why-nots a --body does not cure: the port itself is refused.
NO_BODY_CURES = ("CPU and CUDA share no kernel", "no DispatchStub", "the op takes",
                 "the stub", "the shared function", "incomplete: ")


def refusal_label(how: str) -> str:
    """A short name for a refusal's reason, for the summary's counts."""
    labels = ((op_kind.NOT_STRUCTURED, "no shared CPU/CUDA kernel"),
              (op_kind.NOT_ELEMENTWISE, "not elementwise"), (op_kind.UFUNC, "ufunc codegen"),
              ("reduces its result", "reduction"), ("works along a dimension", "works along a dim"),
              ("out= overloads with their own", "several kernels"), ("takes a str argument", "str argument"),
              ("whose str argument picks its kernel", "str argument"),
              ("no DispatchStub", "no DispatchStub"), ("takes (", "other arguments"),
              ("incomplete: ", "incomplete"),
              (PORT_FIRST, "another op's port first"))
    return next((label for phrase, label in labels if phrase[:40] in how), "other")


# The summary's verdicts, in its order
TALLIED = (("automatic", "ported automatically"), ("--complex-body", "with --complex-body EXPR"),
           ("--body", "with --body EXPR"))
VERDICTS = tuple(v for v, _ in TALLIED) + ("refused",)
# The AUTO column of an op the command ports with no flag says what was measured of the port it
# writes (porter.commands.candidates: yes only where it was measured green, else unverified);
# of the others, the flag the command needs, or no (refused)
UNVERIFIED = "unverified"
AUTO_CELL = {"automatic": UNVERIFIED, "--complex-body": "--complex-body", "--body": "--body", "refused": "no"}


def tally(found) -> str:
    """Some candidates counted by verdict, refusals by reason, in this shape: 'N ported
    automatically, N with --complex-body EXPR, N with --body EXPR, N refused (N no shared CPU/CUDA
    kernel, ...)'.
    docs/porting.md quotes these clauses; tests/test_candidates.py holds it to them."""
    parts = [f"{n} {words}" for verdict, words in TALLIED if (n := sum(c.verdict == verdict for c in found))]
    refused: dict[str, int] = {}
    for c in found:
        if c.verdict == "refused":
            label = refusal_label(c.how)
            refused[label] = refused.get(label, 0) + 1
    if refused:
        by_reason = ", ".join(f"{n} {label}" for label, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{sum(refused.values())} refused ({by_reason})")
    return ", ".join(parts) or "none"


def summary(found) -> dict[str, str]:
    """The counts `candidates` prints: a headline, then forward and backward ops apart (an
    issue counting 'elementwise ops on MPSGraph' counts the forward ones; the `.grad_input`
    overloads are listed since backward ops are ported too)."""
    def where(group) -> str:
        graph = sum(c.state == MPSGRAPH for c in group)
        return ", ".join(part for part in (f"{graph} on MPSGraph" if graph else "",
                                           f"{len(group) - graph} without MPS" if len(group) > graph else "") if part)
    forward = [c for c in found if not c.backward]
    backward = [c for c in found if c.backward]
    graph = sum(c.state == MPSGRAPH for c in found)
    split = f" ({sum(c.state == MPSGRAPH for c in forward)} forward, " \
            f"{sum(c.state == MPSGRAPH for c in backward)} backward)" if backward else ""
    lines = {"headline": f"{graph} op(s) on MPSGraph{split}, {len(found) - graph} without MPS"}
    if forward:
        lines["forward"] = f"forward ops ({where(forward)}): {tally(forward)}"
    if backward:
        lines["backward"] = f"backward ops ({where(backward)}): {tally(backward)}"
    return lines


@dataclass
class Inventory:
    candidates: list[Candidate]
    others: int                # ops with an MPS-specific row that are not elementwise of those kinds


def find(checkout: co.Checkout) -> Inventory:
    text = checkout.read(co.NATIVE_YAML)
    families: dict[str, list[native_yaml.Entry]] = {}
    for e in native_yaml.scan(text):
        families.setdefault(_root(e.name), []).append(e)
    hosts = {rel: HostSource(checkout.read(rel), rel) for rel in checkout.glob(co.OPERATIONS, "*.mm")}
    defined: dict[str, tuple[str, HostSource, object]] = {}
    for rel, host in hosts.items():
        for d in host.definitions:
            key = f"stub:{d.name}" if d.shape == STUB else d.name
            defined.setdefault(key, (rel, host, d))
    facts = _Facts(checkout)
    for host in hosts.values():
        facts.registered |= set(re.findall(r"\bREGISTER_DISPATCH\(\s*(\w+_stub)\b", host.text))
        # UnaryKernel.mm's macro form registers `name_stub`
        facts.registered |= {f"{n}_stub" for n in re.findall(r"^\s*REGISTER_UNARY_TI_DISPATCH\(\s*(\w+)\s*\)",
                                                            host.text, re.M)}
    found, others = [], 0
    for op, entries in families.items():
        # The commands' classification, with the wider net: ops tagged `pointwise` are listed
        # too, with the reason the commands refuse them.
        classified, out = op_kind.classify_family(
            entries, include_pointwise=True,
            runs_stub=lambda e: bool(facts.shared.setdefault(op, shared_function_stubs(checkout, e))))
        if out is None:
            continue
        own = [r for e in entries for r in mps_specific_rows(e)]
        stub_line = defined.get(f"stub:{op}")
        kind = classified.shape if classified.elementwise else OTHER
        if own or stub_line:
            defs = [defined[r.kernel] for r in own if r.kernel in defined]
            defs += [stub_line] if stub_line else []
            if defs and all(host.is_metal(d) for _, host, d in defs):
                continue            # a Metal impl behind its own yaml row: native
            if kind == OTHER and not (classified.elementwise and (classified.scalars or classified.strings)):
                # ops wearing scalar or str arguments are listed with the reason they are not
                # one functor (mse_loss's reduction, glu's dim, gelu's approximate)
                others += 1
                continue
            shape = defs[0][2].shape if defs else "row"
            files = [co.NATIVE_YAML] if own else []
            files += list(dict.fromkeys(rel for rel, _, _ in defs))
            candidate = _candidate(op, MPSGRAPH, shape, classified, out, defs, files, facts)
        elif not any(e.mps_rows() for e in entries) and kind != OTHER:
            candidate = _candidate(op, NO_MPS, "", classified, out, [], [co.NATIVE_YAML], facts)
        else:
            continue
        found.append(candidate)
    found.sort(key=lambda c: (c.state != MPSGRAPH, VERDICTS.index(c.verdict) > 1, c.op))
    return Inventory(found, others)


def _root(name: str) -> str:
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


class _Facts:
    """Per-checkout lookups built once: stubs, CPU impl -> stub, float meta functions, xfails."""

    def __init__(self, checkout: co.Checkout):
        self.checkout = checkout
        self.stubs = declared_stubs(checkout)
        self.impl_stubs: dict[str, list[str]] = {}
        self.float_meta: set[str] = set()
        for rel in checkout.glob(co.NATIVE, "*.cpp"):
            source = checkout.read(rel)
            for kernel, stubs in impl_stubs(source).items():
                self.impl_stubs.setdefault(kernel, []).extend(stubs)
            self.float_meta |= float_meta_ops(source)
        self.unimplemented: set[str] = set()
        self.complex_tested: set[str] = set()       # SUPPORTED_COMPLEX_OPS: MPS tests complex64
        if checkout.exists(co.COMMON_MPS):
            from porter.source import xfail_lists

            try:
                entries = xfail_lists.entries(checkout.read(co.COMMON_MPS), co.COMMON_MPS, sets=True)
            except Exception:       # a broken common_mps.py is `porter check`'s finding, not ours
                entries = []
            self.unimplemented = {e.key for e in entries if e.dict_name in xfail_lists.UNIMPLEMENTED}
            self.complex_tested = xfail_lists.complex_supported(entries)
        self.fallback = checkout.read(co.MPS_FALLBACK) if checkout.exists(co.MPS_FALLBACK) else ""
        self.shared: dict[str, list[str]] = {}      # op -> stubs its plain shared function runs
        self.registered: set[str] = set()           # stubs a host file already gives a kernel
        self._c10 = None
        self._library = None
        self._yaml_ops: set[str] | None = None

    def yaml_ops(self) -> set[str]:
        """The op names of native_functions.yaml (an entry's name before its overload)."""
        if self._yaml_ops is None:
            self._yaml_ops = {_root(e.name) for e in native_yaml.scan(self.checkout.read(co.NATIVE_YAML))}
        return self._yaml_ops

    def indexing(self) -> str:
        """The checkout's c10/metal/indexing.h ("" when it has none)."""
        path = ternary_port.INDEXING
        return self.checkout.read(path) if self.checkout.exists(path) else ""

    def c10(self):
        if self._c10 is None:
            self._c10 = available_functions(self.checkout)
        return self._c10

    @property
    def library(self):
        """The c10/metal routines, and the CPU helpers porter translates into c10/metal."""
        if self._library is None:
            from porter.port.helpers import Library
            self._library = Library(self.checkout, self.c10)
        return self._library

    def integer_facts(self, op: str) -> tuple[bool, bool]:
        """(tests integer dtypes on MPS, integers compute in float) as `porter.port.resolve.resolve` sees them."""
        from porter.source.dtypes import has_integer
        from porter.source.opinfo_source import for_op, mps_dtypes

        opinfos, _ = for_op(self.checkout, op)
        has_int = has_integer(mps_dtypes(opinfos))
        promotes = op in self.float_meta or any(o.flag("promotes_int_to_float") for o in opinfos)
        return has_int, promotes

    def stub_of(self, op: str, kernel: str) -> Stub | None:
        for name in (*self.shared.get(op, []), *self.impl_stubs.get(kernel, []), f"{op}_stub"):
            if name in self.stubs:
                return self.stubs[name]
        return None


def _candidate(op, state, shape, classified: op_kind.OpKind, out, defs, files, facts: _Facts) -> Candidate:
    kind = classified.shape
    tensors = UNARY if len(classified.tensors) == 1 else BINARY
    family = None
    picked = _picked_by_str(op, state, classified, facts) if not classified.portable else None
    if classified.portable:
        automatic, how, family = _automatic(op, kind, tensors, out, defs, facts)
    elif picked is not None:
        automatic, how, picked_files = picked
        files = picked_files or files
    else:
        automatic, how = False, classified.reason
    way = "in place" if how.startswith((IN_PLACE_ONLY, STR_PICKS)) else "shared"
    if picked is not None:
        pass        # the files of upstream's gelu shape (porter.port.enum_port)
    elif way == "in place":
        # the yaml row stays; the impl's own host file and the kernel file change
        files = [f for f in files if f != co.NATIVE_YAML] + [f"{co.KERNELS}/{PAIRS[tensors]}.metal"]
    elif classified.portable and not how.startswith(ALREADY_REGISTERED):
        family = family or PAIRS[tensors]
        files += [f"{co.KERNELS}/{family}.metal", f"{co.OPERATIONS}/{family}.mm"]
        if how == COMPLEX_WRITTEN:
            files.append(complex_helpers.UTILS)
        indexing = facts.indexing() if kind == op_kind.TERNARY else ""
        if indexing and not ternary_alpha.defines_macro(indexing):
            files.append(ternary_port.INDEXING)
    keys = {op, op.replace("special_", "special.", 1), op.replace("linalg_", "linalg.", 1)}
    if state == NO_MPS and keys & facts.unimplemented:
        files.append(co.COMMON_MPS)
    if state == MPSGRAPH and re.search(rf'm\.impl\(\s*"(?:aten::)?{re.escape(op)}_?[."]', facts.fallback):
        files.append(co.MPS_FALLBACK)
    if classified.portable and kind in PAIRS and keys & facts.complex_tested \
            and how not in (TRUTH_VALUES, COMPLEX_FROM_CPU, COMPLEX_FROM_LAMBDA, COMPLEX_WRITTEN, COMPLEX_ONLY) \
            and PORT_FIRST not in how:
        how += "; its complex64 test needs --complex-body EXPR"
    command = f"porter {'migrate-from-mpsgraph' if state == MPSGRAPH else 'new-op'} {op}"
    if classified.portable and PORT_FIRST in how:
        # the command ports the other op with it (porter.port.joint): its own plan answers
        automatic, how, planned = _planned_with_prerequisite(op, state, how, facts)
        files = planned or files
    if automatic and "--complex-body" in how:
        verdict = "--complex-body"      # the command refuses it without one: not automatic
        automatic = False
    elif automatic:
        verdict = "automatic"
    elif classified.portable and not how.startswith(NO_BODY_CURES) and PORT_FIRST not in how \
            and picked is None:
        verdict = "--body"
    else:
        verdict = "refused"
    return Candidate(op, state, shape, kind, out.lineno, automatic, how,
                     # the command as printed ports it: none for a refused op, and none for
                     # one that needs --body EXPR (run bare, that command exits 1)
                     tuple(dict.fromkeys(files)), command if verdict == "automatic" else None,
                     backward=out.is_backward, way=way, verdict=verdict)


IN_PLACE_ONLY = "in place only"
STR_PICKS = "one kernel per value of"


def _picked_by_str(op: str, state: str, classified: op_kind.OpKind, facts: _Facts):
    """(automatic, how, files) of an op whose str argument picks its kernel, as
    migrate-from-mpsgraph ports it (porter.port.enum_port: each CPU branch's scalar function
    translated), or None for any other refused op."""
    if state != MPSGRAPH or not classified.strings or not classified.reason.startswith("takes a str"):
        return None
    from porter.errors import PorterError
    from porter.port import enum_port
    if not enum_port.is_enum_op(facts.checkout, op):
        return None
    try:
        spec, found = enum_port.resolve_enum(facts.checkout, op)
    except PorterError as err:
        return False, err.message.removesuffix("; nothing was written"), None
    for kernel, lam in found.kernels:
        done = translate_lambda(lam, (), "float", lambda: available_functions(facts.checkout))
        if done.statements is None:
            return False, (f"{kernel}: {done.reason} (its CPU branch at {lam.path}:{lam.line}); "
                           "port it by hand"), None
    kernels = " and ".join(k for k, _ in sorted(found.kernels, key=lambda k: k[0] != op))
    how = (f"{STR_PICKS} {found.argument} ({kernels}, from its CPU kernel's branches), picked "
           f"in the host through {found.convert.function}")
    return True, how, [spec.in_place.path, spec.metal_path, spec.host_path]
# the op runs another op's stub, which has no MPS kernel: refused as the command refuses it
INCOMPLETE_FIRST = "incomplete: "
# the stub the op's shared function runs has its MPS kernel: the port is the op's yaml row
ALREADY_REGISTERED = "Metal kernel already registered on"


def _automatic(op: str, kind: str, tensors: str, out, defs, facts: _Facts) -> tuple[bool, str, str | None]:
    """(porter ports it without --body, how or why not, its kernel family when not the default)."""
    automatic, how = _automatic_how(op, kind, tensors, out, defs, facts)
    from porter.port.resolve import ACTIVATION_MPSGRAPH, family_of

    stub = facts.stub_of(op, next(iter({r.kernel for r in out.dense_rows()}), ""))
    if stub is None or how.startswith(IN_PLACE_ONLY):
        return automatic, how, None
    if kind == op_kind.TERNARY:
        # beside the host file named after the stub's header (porter.port.resolve)
        return automatic, how, stub.header.rsplit("/", 1)[-1].removesuffix(".h")
    # the commands' rule (porter.port.resolve.family_of)
    in_activation_mm = any(rel == f"{co.OPERATIONS}/{ACTIVATION_MPSGRAPH}" for rel, _, _ in defs)
    family = family_of(stub.header, in_activation_mm, kind in (op_kind.ALPHA, op_kind.SCALAR),
                       facts.checkout.exists(f"{co.KERNELS}/ActivationKernel.metal"), tensors)
    return automatic, how, family


def _automatic_how(op: str, kind: str, tensors: str, out, defs, facts: _Facts) -> tuple[bool, str]:
    kernels = {r.kernel for r in out.dense_rows()}
    keys = {k for r in out.dense_rows() for k in r.keys}
    own = {r.kernel for r in out.mps_rows()}
    in_place = out.fields.get("structured") == "True" and any(
        d.shape == "impl" and d.name in own for _, _, d in defs)
    if len(kernels) != 1 or not {"CPU", "CUDA"} <= keys:
        if in_place:
            return False, (f"{IN_PLACE_ONLY} (CPU and CUDA share no kernel): --body EXPR; the impl "
                           "keeps its row and calls the kernel")
        return False, "CPU and CUDA share no kernel for MPS to join"
    stub = facts.stub_of(op, next(iter(kernels)))
    if stub is None:
        if in_place and kind in (op_kind.ALPHA, op_kind.SCALAR):
            # the commands refuse it: an in-place port has no host function to pass scalars
            return False, ("no DispatchStub behind its CPU kernel, and an in-place port passes "
                           "no scalars to a kernel")
        if in_place:
            return False, (f"{IN_PLACE_ONLY} (no DispatchStub behind its CPU kernel): --body EXPR; "
                           "the impl keeps its row and calls the kernel")
        return False, "no DispatchStub behind its CPU kernel"
    if stub.name in facts.registered:
        # another op's stub (sub_out runs add_stub with -alpha): the port is the op's row alone
        runs = "" if stub.name == f"{op}_stub" else f" ({next(iter(kernels))} runs it)"
        return True, f"{ALREADY_REGISTERED} {stub.name}{runs}"
    if kind == op_kind.TERNARY:
        return _automatic_ternary(stub, facts)
    other_op = stub.name.removesuffix("_stub")
    if kind in (op_kind.ALPHA, op_kind.SCALAR) and other_op != op and other_op in facts.yaml_ops():
        # another op's stub, with no MPS kernel (sub_out runs add_stub with -alpha): the command
        # ports the op through it only as resolve decides (its CPU lambda, or its kernel first);
        # its refusal is the reason, naming the stub that lacks its kernel
        from porter.errors import PorterError
        from porter.port.resolve import resolve
        try:
            resolve(facts.checkout, op)
        except PorterError as err:
            return False, f"{INCOMPLETE_FIRST}{err.message.removesuffix('; nothing was written')}"
    if kind in (op_kind.ALPHA, op_kind.SCALAR):
        return _automatic_with_scalars(op, tensors, out, stub, defs, facts)
    if stub.iterator_type is None or len(stub.params) != 1:
        return False, f"{stub.name} takes ({', '.join(stub.params)})"
    lam = scalar_lambda(facts.checkout, stub.name)
    routed = _routed_by_dtype(next(iter(kernels)), stub, lam, facts)
    if routed is not None:
        return routed
    why_not = "no CPU lambda found"
    if lam is not None and len(lam.params) == (1 if kind == UNARY else 2):
        translation = translate_lambda(lam, (), "float", facts.library)
        if translation.statements is not None:
            if kind == BINARY and _reads_truth_values(op, lam, facts):
                return True, TRUTH_VALUES
            if kind == UNARY and bool_valued(lam) and "cast_to" in facts.c10():
                return True, TRUTH_VALUES       # logical_not's `!a`
            if lam.complex_case is not None and translate_complex(
                    lam.complex_case, lambda: complex_functions(facts.checkout)).statements is not None:
                return True, COMPLEX_FROM_CPU
            if lam.complex_case is None and lam.covers_complex:
                from porter.port.helpers import Library
                own = Library(facts.checkout, facts.c10)        # the routines this op's port adds
                if translate_complex(lam, lambda: complex_functions(facts.checkout), own).statements is not None:
                    return True, COMPLEX_WRITTEN if own.complex_added else COMPLEX_FROM_LAMBDA
            return True, "CPU lambda"
        why_not = f"CPU lambda: {translation.reason}"
    used: list[str] = []
    for _, host, d in defs:
        used += [s for s in host.selectors(d) if s not in used]
    choice = selectors.body_for(used, kind, False, False)
    if choice.expression and not selectors.body_for(used, kind, True, False).expression:
        # A float-only selector: it fits only if the op has no integer dtypes or computes
        # them in float; those facts come from the OpInfo, read for this op alone.
        has_int, promotes = facts.integer_facts(op)
        choice = selectors.body_for(used, kind, has_int, promotes)
    if choice.expression:
        return True, f"selector {choice.selector}"
    if not defs:
        return False, why_not
    return False, choice.reason


PORT_FIRST = "port it first:"
# an op ported together with the op whose stub its shared function runs (sgn with sign)
WITH_PRIOR = "port first, in one command:"


def _planned_with_prerequisite(op: str, state: str, how: str, facts: _Facts):
    """(automatic, how, files) of an op whose shared function runs another op's stub that has no
    MPS kernel (sgn_out: sign_stub for real inputs), from the plan its command makes:
    migrate-from-mpsgraph plans that op's port first and this one's after it, in one ChangeSet
    (porter.port.joint); new-op refuses it. Answering from the plan itself keeps the list and
    the command one decision; the plan reads this op's OpInfo, so it runs for such ops alone."""
    from porter.errors import PorterError
    from porter.port.migration import plan_migration
    from porter.port.plan import plan_port
    from porter.port.resolve import resolve

    try:
        plan = plan_migration(facts.checkout, op) if state == MPSGRAPH \
            else plan_port(facts.checkout, resolve(facts.checkout, op))
    except PorterError as err:
        return False, f"{how}; {err.message.removesuffix('; nothing was written')}", None
    head, why = how.split(PORT_FIRST, 1)
    first = head.rsplit(": ", 1)[-1].rstrip(", ")
    together = f"{first}'s {WITH_PRIOR}{why}"
    files = list(plan.changes.changes)
    flags = {g.flag.split()[0] for g in plan.gaps}
    if plan.wrong or not flags <= {"--body", "--complex-body"}:
        missing = [g.what for g in plan.gaps] + [w.message for w in plan.wrong]
        return False, f"incomplete: {'; '.join(missing)} ({together})", None
    if plan.gaps:
        # what the command asks for (its own gaps: a prerequisite with gaps raised above);
        # the verdict reads the flag (--complex-body alone: "--complex-body", else "--body")
        needs = "; ".join(f"needs {g.flag} for {g.what}" for g in plan.gaps)
        return flags == {"--complex-body"}, f"{needs}; {together}", files
    return True, f"{COMPLEX_ONLY}; {together}", files
COMPLEX_ONLY = "CPU lambda (complex case: its other dtypes run another stub's kernel)"


def _routed_by_dtype(kernel: str, stub, lam, facts: _Facts) -> tuple[bool, str] | None:
    """The commands' decision (porter.port.resolve._check_route) for a shared function that runs
    another op's stub for some dtypes (sgn_out: sign_stub for real inputs): refused until that
    stub has its MPS kernel, then its own stub's port for the dtypes that reach it; None for a
    function that runs its own stub alone."""
    from porter.source import stub_route
    routes = stub_route.routes(facts.checkout, kernel)
    others = [r for r in routes if r.stub != stub.name]
    if not others or not all(r.when in (stub_route.COMPLEX, stub_route.REAL) for r in routes):
        return None
    missing = next((r for r in others if r.stub not in facts.registered), None)
    if missing is not None:
        first = missing.stub.removesuffix("_stub")
        return False, f"{missing.stub} has no MPS kernel: {first}, {PORT_FIRST} {kernel} runs it for {missing.when} inputs"
    case = lam and (lam.complex_case or (lam if lam.dispatch == "complex" else None))
    if case is not None:
        from porter.port.functor import complex_helper
        derived = translate_complex(case, lambda: complex_functions(facts.checkout), None,
                                    complex_helper(facts.checkout, facts.c10))
        if derived.statements is not None:
            return True, COMPLEX_ONLY
        return False, f"--complex-body EXPR: {derived.reason}"
    return None


# A bool op whose CPU lambda reads its arguments as truth values only (logical_and's `a && b`):
# porter writes one template over every dtype, complex64 included (porter.port.functor)
TRUTH_VALUES = "CPU lambda (truth values: one template for every dtype, complex64 included)"
# a CPU kernel with a complex case of its own that maps onto c10::metal's float2 routines
COMPLEX_FROM_CPU = "CPU lambda (complex64 from the CPU's complex case)"
# one lambda for real and complex dtypes whose routines have float2 overloads in c10/metal, or
# that porter writes there (porter.port.complex_helpers: acosh, asinh, atanh)
COMPLEX_FROM_LAMBDA = "CPU lambda (complex64 too: float2 routines of c10/metal)"
COMPLEX_WRITTEN = "CPU lambda (complex64 too: porter adds float2 routines to c10/metal/utils.h)"


def _reads_truth_values(op: str, lam, facts: _Facts) -> bool:
    from porter.source.opinfo_source import for_op

    if "cast_to" not in facts.c10() or truthiness(lam.body, tuple(lam.params)) is None:
        return False
    return lam.return_type == "bool" or any(
        o.flag("always_returns_bool") for o in for_op(facts.checkout, op)[0])


def _automatic_ternary(stub, facts) -> tuple[bool, str]:
    """The commands' decision for three tensors and a Scalar (porter.port.ternary_port): the
    host library must take the scalar, the CPU lambda must translate."""
    checkout = facts.checkout
    if not facts.indexing():
        return False, (f"incomplete: the checkout has no {ternary_port.INDEXING} to define "
                       f"{ternary_alpha.MACRO} in")
    _, problem = ternary_port.library_edits(checkout)
    if problem is not None:
        return False, (f"incomplete: {host_library.LIBRARY_HEADER} declares exec_ternary_kernel(iter, "
                       f"name) only, and porter cannot write its scalar overload: {problem}")
    lam = scalar_lambda(checkout, stub.name)
    if lam is None or len(lam.params) != 3:
        return False, "no CPU lambda of three operands found: --body EXPR in a, b, c and the scalar"
    try:
        ternary_port.translate(lam.body, lam.params, tuple(lam.locals))
    except ternary_port.Untranslatable as err:
        return False, f"CPU lambda: {err}"
    return True, "CPU lambda"


def _automatic_with_scalars(op, tensors, out, stub, defs, facts) -> tuple[bool, str]:
    """The commands' decision for an op with scalar arguments (porter.port.functor.build)."""
    scalars, _ = scalar_args.schema_scalars(native_yaml.arguments(out.schema))
    if stub.iterator_type:
        # a stub shared with another op, filled by the op's function (threshold_backward_out)
        from porter.port.resolve import stub_scalars
        kernel = next(iter({d.kernel for d in out.dense_rows()}), "")
        scalars = stub_scalars(facts.checkout, stub, scalars, kernel) or scalars
    problem = scalar_args.stub_mismatch(scalars, stub.params) if stub.iterator_type else \
        "the stub's kernel does not take a TensorIterator first"
    if problem:
        return False, f"{problem} ({stub.name}: {stub.signature})"
    names = tuple(a.name for a in scalars)
    lam = scalar_lambda(facts.checkout, stub.name, op)
    if lam is None:
        # the functor's names (porter.port.functor.functor_params): a backward op's schema names
        args = native_yaml.arguments(out.schema)
        own = tuple(native_yaml.argument_name(t) for t in args.tensors) if out.is_backward else ()
        return False, "no CPU lambda found: --body EXPR in " + ", ".join(
            own or (("x",) if tensors == UNARY else ("a", "b"))) + ", " + ", ".join(names)
    if len(lam.params) != (1 if tensors == UNARY else 2):
        return False, f"the CPU lambda takes {len(lam.params)} arguments"
    if lam.alternatives and lam.choice is None:
        return False, f"the CPU kernel chooses between {lam.alternatives + 1} lambdas by its scalars"
    translation = translate_lambda(lam, names, "float", facts.library)
    if translation.statements is None:
        return False, f"CPU lambda: {translation.reason}"
    return True, "CPU lambda"
