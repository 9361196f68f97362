"""Plan the edits of a native Metal port of one op: the `new-op` pipeline's second step.

`plan_port` reads the files it needs (each once), runs the pure edit functions, validates the
planned texts and returns a ChangeSet plus what the user must know. It writes nothing.
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.port import complex_helpers, completeness, family_host, formatting, helpers, validate
from porter.source import fallback_example, metal_scan
from porter.source.c10_metal import available_functions
from porter.source.cpu_kernel import dispatches_floating_only
from porter.apply.changes import ChangeSet
from porter.port.edits import host as host_edit
from porter.port.edits import in_place as in_place_edit
from porter.port.edits import metal as metal_edit
from porter.port.edits import dispatch_rows as yaml_edit
from porter.port.edits import opinfo as opinfo_edit
from porter.port.edits import xfails as xfail_edit
from porter.source import xfail_lists
from porter.errors import Incomplete, PorterError
from porter.source.dtypes import METAL, METAL_FLOATING
from porter.port.functor import SKELETON, Functor, build, complex_only, functor_params
from porter.port import scalars as scalar_args
from porter.source.host_scan import HostFile
from porter.source.metal_scan import MetalFile
from porter.source.mpsgraph_scan import source_of
from porter.source.opinfo_source import call_span
from porter.port import ternary_port
from porter.port.resolve import NATIVE, TERNARY, UNARY, OpSpec
from porter.port.torchgen_check import EntryValidator
from porter.port.templates import render


FLOATING_DEFAULT = frozenset({"float32", "float16", "bfloat16"})


class Plan:
    """A port's planned edits (`changes`), its functor and what the user must be told."""

    def __init__(self, spec: OpSpec, changes: ChangeSet):
        self.spec = spec
        self.changes = changes
        self.functor: Functor | None = None
        self.notes: list[str] = []
        self.removed: list[dict] = []          # {"path", "line", "what", "name"}
        self.gaps: list[completeness.Gap] = []       # what makes the port incomplete
        self.wrong: list[completeness.Wrong] = []    # registrations a Mac would reject
        self.refused: frozenset[str] = frozenset()   # dtypes the CPU reference refuses
        self.new_kernels: dict[str, str] = {}        # .metal path -> kernel porter registers there
        self.long_params = False    # the params struct also comes at long, for integer inputs
        self.unregistered: set[str] = set()     # dtypes the MPS test sends, left without a kernel on purpose
        self.added_dtypes: tuple[str, ...] = ()     # registered for an existing functor that lacked them


def plan_port(checkout: co.Checkout, spec: OpSpec, body: str | None = None,
              changes: ChangeSet | None = None, validator: EntryValidator | None = None,
              complex_body: str | None = None, into: Plan | None = None) -> Plan:
    """Edits that make `spec` run a native Metal kernel; `changes` may hold earlier edits.

    `body` and `complex_body` are the user's Metal expressions (`--body`, `--complex-body`);
    `validator` checks yaml entries with torchgen (a warmed-up one saves ~0.1 s). `into` is a
    plan begun by a caller (a migration, with its own changes and notes): the port's results
    land in it, so that no field is left behind by a copy."""
    if spec.stub_unread and not spec.in_place and spec.state != NATIVE:
        # a kernel registered on a stub the shared kernel may never run: no verdict of it holds
        raise Incomplete(spec.stub_unread, path=co.NATIVE_YAML,
                         line=(spec.backend_entries or spec.entries)[0].lineno,
                         hint=f"run it in a checkout whose {co.NATIVE}/*.cpp defines {spec.cpu_kernel}")
    if into is not None:
        plan = into
    else:
        plan = Plan(spec, changes if changes is not None else ChangeSet(checkout.root))
    cs = plan.changes
    plan.notes += spec.notes        # what resolve found the user must know (an ignored bool)

    def read(path: str) -> str:
        return cs.current(path, checkout.read)

    def write(path: str, new: str) -> None:
        cs.set(path, checkout.read(path) if checkout.exists(path) else None, new)

    # A port in place keeps the op's own MPS row: the yaml does not change.
    yaml_changed = False if spec.in_place else _plan_yaml(spec, read, write)
    if spec.kind == TERNARY:
        # three tensors and a Scalar: upstream's addcmul shape (porter.port.ternary_port)
        if complex_body is not None:
            plan.notes.append("--complex-body ignored: a ternary functor's complex overload is the "
                              "same expression (c10::metal::mul and div take float2)")
        ternary_port.plan_kernel(checkout, spec, body, read, write, plan)
        ternary_port.plan_host(checkout, spec, read, write, plan)
    else:
        _plan_kernel(checkout, spec, body, complex_body, read, write, plan)
        if spec.in_place:
            _plan_in_place_host(checkout, spec, read, write, plan)
        else:
            _plan_host(checkout, spec, read, write, plan)
    _plan_expectations(checkout, spec, read, write, plan)
    problem = formatting.format_changes(checkout.root, cs)
    if problem:
        plan.notes.append(problem)
    if yaml_changed:
        # Last, so that a warm validator has had the whole planning to import torchgen.
        tags = checkout.read(co.TAGS_YAML) if checkout.exists(co.TAGS_YAML) else None
        validate.yaml_entries(read(co.NATIVE_YAML), {e.full_name for e in spec.backend_entries},
                              tags, validator)
    return plan


def plan_kernel(checkout, spec: OpSpec, read, write, plan: Plan) -> None:
    """The functor of `spec.kernel` from its CPU lambda, and its registrations (a port of
    several kernels, porter.port.enum_port, plans each)."""
    _plan_kernel(checkout, spec, None, None, read, write, plan)


def plan_expectations(checkout, spec: OpSpec, read, write, plan: Plan) -> None:
    """The op's "not implemented on MPS" expectations, removed."""
    _plan_expectations(checkout, spec, read, write, plan)


def _plan_yaml(spec: OpSpec, read, write) -> bool:
    old = read(co.NATIVE_YAML)
    new = yaml_edit.add_mps(old, spec.backend_entries)
    write(co.NATIVE_YAML, new)
    return new != old


def _plan_kernel(checkout, spec: OpSpec, body, complex_body, read, write, plan: Plan) -> None:
    """The functor and its registrations in the op's .metal file: one step for every op, with
    or without scalar arguments (those take ALPHA registrations, porter.port.scalars)."""
    if not checkout.exists(spec.metal_path):
        raise PorterError(f"{spec.metal_path} is missing: porter adds {spec.kind} kernels there",
                          hint="is this a PyTorch checkout with MPS kernels?")
    text = read(spec.metal_path)
    _check_unique_kernel_name(checkout, spec)
    metal = MetalFile(text, spec.metal_path)
    if spec.scalars:
        _plan_alpha_kernel(checkout, spec, body, complex_body, text, metal, write, read, plan)
    else:
        _plan_plain_kernel(checkout, spec, body, complex_body, text, metal, write, read, plan)


def _plan_plain_kernel(checkout, spec: OpSpec, body, complex_body, text: str, metal: MetalFile,
                       write, read, plan: Plan) -> None:
    tested_complex = _tested_with_complex(checkout, spec)
    wanted = completeness.dtype_plan(spec, tested_complex)
    plan.refused = wanted.refused
    if wanted.refused:
        plan.notes.append(f"no kernel for {', '.join(sorted(wanted.refused))}: {spec.op}'s MPS test "
                          "sends them but the CPU reference refuses them (its OpInfo's CPU dtypes "
                          "leave them out), so their expectations stay")
    # the functor and registrations cover the dtypes that get a kernel, nothing the CPU refuses
    kernel_spec = spec._replace(dtypes=wanted.register | (spec.dtypes & {"complex64"}))
    skeleton_at = _skeleton_span(metal, spec.kernel)
    if skeleton_at is not None and body is None:
        plan.gaps.append(completeness.Gap(
            f"the body of {spec.kernel}_functor (porter's skeleton is still in {spec.metal_path})",
            f"--body EXPR (in {' and '.join(functor_params(spec))})"))
    pending_functor = None
    if spec.kernel not in metal.functors or (skeleton_at is not None and body is not None):
        library = helpers.Library(checkout, lambda: available_functions(checkout))
        plan.functor = build(kernel_spec, body, library, complex_body)
        _plan_helpers(library, plan.functor, read, write)
        if skeleton_at is not None:     # the body the skeleton was waiting for
            start, end = skeleton_at
            text = text[:start] + plan.functor.text.rstrip("\n") + "\n" + text[end:]
        elif metal_edit.registers_beside_functor(text, spec.kind):
            text = metal_edit.add_functor(text, spec.kernel, plan.functor.text, spec.kind)
        else:
            # placed once its registrations are: it follows the functor of the op registered
            # just before it (porter.port.edits.metal's source-order rule)
            pending_functor = plan.functor.text
        if plan.functor.origin == SKELETON:
            if complex_body is not None:
                plan.notes.append("--complex-body is not used with a skeleton: rerun with --body "
                                  "EXPR and --complex-body EXPR together")
    else:
        for option, value in (("--body", body), ("--complex-body", complex_body)):
            if value is not None:
                plan.notes.append(f"{spec.kernel}_functor already exists in {spec.metal_path}; "
                                  f"{option} ignored")
    with_complex = plan.functor is not None and plan.functor.complex
    registered = {(r.in_type, r.out_type) for r in metal.registrations
                  if r.kernel == spec.kernel}
    if registered and with_complex:
        text = metal_edit.add_complex_registration(text, spec.kernel, spec.kind)
    if registered:
        # Registrations written by hand (or by an earlier porter run) stand as they are; a dtype
        # the op's MPS test sends with no kernel gets its registration added here (the build
        # before write then proves the functor takes it), or stays a gap: exit 1.
        if _host_routes_non_floating(checkout, spec, read):
            wanted = wanted._replace(register=frozenset(
                d for d in wanted.register if d in FLOATING_TORCH))
        inputs = {t for t, _ in registered}
        text = _register_missing(spec, text, inputs, _missing_dtypes(wanted.register, inputs), plan)
        if pending_functor is not None:
            text = metal_edit.add_functor(text, spec.kernel, pending_functor, spec.kind)
        write(spec.metal_path, text)
        if spec.dtypes:
            # what is missing is a gap; the registrations already there are not porter's to judge
            for gap in completeness.check(spec, text, wanted)[0]:
                if gap.flag.startswith("--complex-body") and pending_functor is None \
                        and plan.functor is None:
                    # --complex-body only writes a new functor's overload
                    gap = gap._replace(flag=f"a complex overload of the existing {spec.kernel}_functor "
                                            "and its float2/half2 registrations, written by hand")
                plan.gaps.append(gap)
        return
    dtypes = kernel_spec.dtypes
    if not dtypes:
        dtypes = FLOATING_DEFAULT
        plan.notes.append(f"no OpInfo names MPS dtypes for {spec.op}: registered "
                          f"{', '.join(sorted(dtypes))} only")
    try:
        if spec.kind == UNARY:
            kernels2, pairs = metal_edit.unary_registration_plan(
                dtypes, spec.promotes_int_to_float, spec.returns_bool)
            text = metal_edit.add_unary_registration(text, spec.kernel, kernels2, pairs)
        elif completeness.always_bool(spec):
            # every input dtype -> bool, with the castout variant for a non-bool out=
            inputs = [METAL[d] for d in METAL if d in dtypes and d != "complex64"]
            if with_complex and "complex64" in spec.dtypes:
                inputs += list(metal_edit.COMPLEX_TYPES)
            text = metal_edit.add_bool_registration(text, spec.kernel, inputs, _has_castout(checkout))
        else:
            macros = metal_edit.binary_registration_macros(dtypes, spec.promotes_int_to_float)
            text = metal_edit.add_binary_registration(text, spec.kernel, macros)
        if with_complex and not (spec.kind != UNARY and completeness.always_bool(spec)):
            text = metal_edit.add_complex_registration(text, spec.kernel, spec.kind,
                                                       spec.kind == UNARY and spec.returns_bool)
    except ValueError as err:
        raise PorterError(str(err), path=spec.metal_path) from None
    if pending_functor is not None:
        text = metal_edit.add_functor(text, spec.kernel, pending_functor, spec.kind)
    if "complex64" in spec.dtypes and not with_complex and complex_body is None and not tested_complex:
        plan.notes.append(f"complex64 is not registered: {spec.kernel}_functor has no complex "
                          "overload (--complex-body EXPR adds one)")
    write(spec.metal_path, text)
    plan.new_kernels[spec.metal_path] = spec.kernel
    if plan.functor is not None and plan.functor.origin == SKELETON:
        flag = "--complex-body" if complex_only(spec) else "--body"
        plan.gaps.append(completeness.Gap(
            f"the body of {spec.kernel}_functor ({plan.functor.detail})",
            f"{flag} EXPR (in {' and '.join(functor_params(spec))})"))
    if spec.dtypes:     # without an OpInfo there is nothing to measure the registrations against
        gaps, plan.wrong = completeness.check(spec, text, wanted)
        plan.gaps += gaps


FLOATING_TORCH = frozenset({"float32", "float16", "bfloat16"})


def _host_routes_non_floating(checkout, spec: OpSpec, read) -> bool:
    """The host function of the op's stub runs the kernel for floating types only and hands the
    rest elsewhere (fmax: `at::maximum_out`): those dtypes need no kernel."""
    if not checkout.exists(spec.host_path):
        return False
    host = HostFile(read(spec.host_path))
    for reg in host.dispatch_registrations:
        if reg.stub == spec.stub.name and not reg.via_macro:
            fn = host.kernel_functions.get(reg.function.split("::")[-1].lstrip("&"))
            return fn is not None and "isFloatingType(" in host.text[fn.start:fn.end]
    return False


def _missing_dtypes(dtypes, registered_inputs) -> list[str]:
    """The dtypes (in the file's order) whose Metal type no registration of the kernel takes;
    complex needs an overload, not a registration: never listed."""
    return [d for d in sorted(dtypes, key=completeness.metal_order)
            if d in METAL and METAL[d] not in registered_inputs and d != "complex64"]


def _register_missing(spec: OpSpec, text: str, registered_inputs: set[str], missing: list[str],
                      plan: Plan) -> str:
    """One registration per dtype the MPS test sends that has no kernel yet, in the macro the
    kernel's own registrations use (the base macro, or ALPHA for an op with scalars), with the
    output type the op's meta function gives; the build before write proves the functor takes
    them. The one step of new-op and migrate, with or without scalars."""
    if not missing:
        return text
    if spec.scalars:
        rows = [(i, scalar_args.alpha_type(spec.scalars, spec.kernel, o), o)
                for i, o in _alpha_pairs(spec, frozenset(missing))]
        macro = metal_edit.ALPHA_MACROS[spec.kind]
        text = metal_edit.add_after_own_registrations(
            text, spec.kernel, [f"{macro}({spec.kernel}, {i}, {a}, {o});" for i, a, o in rows])
    else:
        pairs = [(METAL[d], completeness.expected_output(spec, METAL[d])) for d in missing]
        text = metal_edit.add_missing_registrations(text, spec.kernel, spec.kind, pairs)
    plan.new_kernels[spec.metal_path] = spec.kernel
    plan.added_dtypes = tuple(missing)
    plan.notes.append(_registered_too(spec, registered_inputs, missing))
    return text


def _registered_too(spec: OpSpec, registered, missing) -> str:
    """The note for registrations porter added beside an existing functor's own."""
    return (f"{spec.kernel}_functor in {spec.metal_path} was registered for "
            f"{', '.join(sorted(registered))} only; {spec.op}'s MPS test also sends "
            f"{', '.join(missing)}: registered those too (the build before writing checks that "
            "the functor takes them)")


def _skeleton_span(metal: MetalFile, kernel: str) -> tuple[int, int] | None:
    """The span of porter's skeleton functor for `kernel` with its comment, if it is still there."""
    span = metal.functor_span(kernel)
    text = metal.text
    if span is None or f"{metal_scan.SKELETON_MARK} {kernel}_functor" not in text[span[0]:span[1]]:
        return None
    start = span[0]
    head = text.rfind(f"// porter: skeleton for {kernel}:", 0, start)
    if head >= 0 and all(line.startswith("//") for line in text[head:start].splitlines()):
        start = head
    return start, span[1]


def _plan_alpha_kernel(checkout, spec: OpSpec, body, complex_body, text: str, metal: MetalFile,
                       write, read, plan: Plan) -> None:
    """An op with scalar parameters: an ALPHA functor and registrations, plus the params struct
    in the family header when the scalars travel as one (porter.port.scalars)."""
    if complex_body is not None:
        plan.notes.append("--complex-body ignored: porter writes no complex overload for ops "
                          "with scalar parameters")
    dtypes = _alpha_dtypes(checkout, spec, plan)
    if spec.kernel in metal.functors:
        if body is not None:
            plan.notes.append(f"{spec.kernel}_functor already exists in {spec.metal_path}; --body ignored")
        registered = {r.in_type for r in metal.registrations if r.kernel == spec.kernel}
        missing = _missing_dtypes(dtypes, registered)
        if missing and registered:
            # as for ops without scalars: registered here, proved by the build before writing
            text = _register_missing(spec, text, registered, missing, plan)
        elif missing:
            plan.gaps.append(completeness.Gap(
                f"a kernel for {', '.join(missing)} ({spec.kernel}_functor in {spec.metal_path} "
                "has no registration)", "a registration written by hand", tuple(missing)))
        write(spec.metal_path, text)
        return
    if "complex64" in dtypes:
        dtypes = dtypes - {"complex64"}
        plan.unregistered.add("complex64")
        plan.notes.append(f"complex64 is not registered: porter writes no complex overload for "
                          f"ops with scalar parameters, so {spec.op}'s complex64 test needs one by hand")
    library = helpers.Library(checkout, lambda: available_functions(checkout))
    functor = build(spec, body, library, dtypes=dtypes)
    _plan_helpers(library, functor, read, write)
    plan.functor = functor
    text = metal_edit.add_functor(text, spec.kernel, functor.text, spec.kind)
    if functor.origin == SKELETON:
        names = ", ".join(functor_params(spec))
        plan.notes.append(f"WARNING: {spec.kernel}_functor is a skeleton that fails the Metal build "
                          f"on purpose: {functor.detail}. Write its body, or rerun with --body EXPR "
                          f"(in {names}).")
        # a body is what this port lacks, as for a plain op's skeleton: an incomplete port, not
        # a file that fails to build
        plan.gaps.append(completeness.Gap(f"the body of {spec.kernel}_functor ({functor.detail})",
                                          f"--body EXPR (in {names})"))
    rows = []
    long_params = plan.long_params = _long_params(spec, dtypes)
    for in_t, out_t in _alpha_pairs(spec, dtypes):
        rows.append((in_t, scalar_args.alpha_type(spec.scalars, spec.kernel, out_t,
                                                  integral=long_params and _stays_integral(in_t, out_t)), out_t))
    text = metal_edit.add_alpha_registration(text, spec.kernel, spec.kind, rows)
    if scalar_args.uses_params_struct(spec.scalars):
        header = params_header(spec.metal_path, text)
        old = read(header) if checkout.exists(header) or header in plan.changes.changes else None
        struct = scalar_args.struct_name(spec.kernel)
        new = old if old is not None else "#pragma once\n"
        if not re.search(rf"\bstruct\s+{struct}\b", new):
            new = new.rstrip("\n") + "\n\n" + scalar_args.header_struct(spec.kernel, spec.scalars)
        elif not re.search(rf"^\s*(using\s+{struct}_float\b|typedef\b.*\b{struct}_float\s*;)", new, re.M):
            # the family header declares the struct (upstream's NanToNumParams) but not the
            # float instantiation the registrations name
            new = new.rstrip("\n") + f"\nusing {struct}_float = {struct}<float>;\n"
        if long_params and not re.search(rf"^\s*(using\s+{struct}_long\b|typedef\b.*\b{struct}_long\s*;)",
                                         new, re.M):
            new = new.rstrip("\n") + "\n" + scalar_args.header_long_alias(spec.kernel)
        write(header, new)
        text = metal_edit.ensure_include(text, header.split("aten/src/", 1)[-1])
    write(spec.metal_path, text)


def params_header(metal_path: str, metal_text: str) -> str:
    """Where a params struct goes: the kernels header the kernel file already includes (upstream's
    ActivationKernel.metal includes kernels/Activation.h, where ThresholdParams lives), else one
    named after the file (UnaryKernel.metal: UnaryKernel.h)."""
    own = metal_scan.kernel_headers(metal_text)
    if len(own) == 1:
        return "aten/src/" + own[0]
    return metal_path.removesuffix(".metal") + ".h"


def _stays_integral(in_t: str, out_t: str) -> bool:
    """An integer input computing in its own type (not promoted to float, not complex)."""
    return in_t not in METAL_FLOATING and in_t != "float2" and out_t not in METAL_FLOATING


def _long_params(spec: OpSpec, dtypes) -> bool:
    """Whether the params struct also comes at long, for integer inputs that stay integers: at
    float, the CPU's `to<scalar_t>()` of a scalar would be rounded first (16777217 on int32)."""
    return scalar_args.integral_params(spec.scalars) and any(
        _stays_integral(in_t, out_t) for in_t, out_t in _alpha_pairs(spec, dtypes))


def _alpha_pairs(spec: OpSpec, dtypes) -> list[tuple[str, str]]:
    pairs = []
    for d in sorted(dtypes, key=lambda d: list(METAL).index(d) if d in METAL else 99):
        t = METAL.get(d)
        if t is None or d == "complex64":
            continue
        if spec.returns_bool:
            out = "bool"
        elif spec.promotes_int_to_float and t not in METAL_FLOATING:
            out = "float"
        else:
            out = t
        pairs.append((t, out))
    return pairs


def _alpha_dtypes(checkout, spec: OpSpec, plan: Plan) -> frozenset[str]:
    """The dtypes to register: those the MPS test sends, less those its expectation lists
    (other than UNIMPLEMENTED, which the port removes) expect to fail on MPS."""
    dtypes = set(spec.dtypes) or set(FLOATING_DEFAULT)
    # An iterator that promotes integers to float hands the kernel floats: the CPU dispatch
    # then says nothing about integer inputs.
    floating_only = not spec.promotes_int_to_float and dispatches_floating_only(checkout, spec.stub.name)
    if floating_only and dtypes - FLOATING_DEFAULT - {"complex64"}:
        dropped = sorted(dtypes - FLOATING_DEFAULT - {"complex64"})
        plan.notes.append(f"not registered: {', '.join(dropped)} (the CPU kernel at "
                          f"{floating_only[0]}:{floating_only[1]} dispatches floating types only: "
                          "on CPU they never reach the stub, the shared function handles or refuses "
                          "them first)")
        dtypes &= FLOATING_DEFAULT | {"complex64"}
        plan.unregistered |= set(dropped)
    if not checkout.exists(co.COMMON_MPS):
        return frozenset(dtypes)
    try:
        found = xfail_lists.entries(checkout.read(co.COMMON_MPS), co.COMMON_MPS)
    except PorterError:
        return frozenset(dtypes)
    keys = set(spec.xfail_keys)
    expected = set()
    for e in found:
        if e.key in keys and e.dict_name not in xfail_lists.UNIMPLEMENTED and e.dtypes:
            expected |= {d.removeprefix("torch.") for d in e.dtypes} & dtypes
    if expected and expected != dtypes:
        plan.notes.append(f"not registered: {', '.join(sorted(expected))} ({co.COMMON_MPS} expects "
                          f"{spec.op} to fail for them on MPS)")
        dtypes -= expected
        plan.unregistered |= expected
    return frozenset(dtypes)


def _plan_helpers(library, functor: Functor, read, write) -> None:
    """The CPU helpers a translated body calls, added to c10/metal/special_math.h
    (porter.port.helpers), and the float2 routines of <complex> its complex overload calls, to
    c10/metal/utils.h (porter.port.complex_helpers)."""
    if functor.origin == SKELETON:
        return
    if library.added:
        write(helpers.SPECIAL_MATH, helpers.add_to_special_math(read(helpers.SPECIAL_MATH),
                                                                list(library.added.values())))
    if library.complex_added and functor.complex:
        write(complex_helpers.UTILS, complex_helpers.add_to_utils(read(complex_helpers.UTILS),
                                                                  library.complex_added))


def _has_castout(checkout) -> bool:
    """Whether the checkout's c10/metal/indexing.h defines REGISTER_BINARY_CASTOUT_OP."""
    from porter.source.c10_metal import headers_dir
    directory = headers_dir(checkout)
    header = directory / "indexing.h" if directory else None
    return bool(header and header.is_file() and re.search(
        r"#\s*define\s+REGISTER_BINARY_CASTOUT_OP\b", header.read_text(encoding="utf-8", errors="replace")))


def _tested_with_complex(checkout, spec: OpSpec) -> bool:
    if not checkout.exists(co.COMMON_MPS):
        return False
    keys = set(spec.xfail_keys)
    try:
        found = xfail_lists.entries(checkout.read(co.COMMON_MPS), co.COMMON_MPS, sets=True)
    except PorterError:
        return False        # a common_mps.py that does not parse is reported by the expectations step
    return bool(keys & xfail_lists.complex_supported(found))


def _check_unique_kernel_name(checkout, spec: OpSpec) -> None:
    for rel in checkout.glob(co.KERNELS, "*.metal"):
        if rel == spec.metal_path:
            continue
        text = checkout.read(rel)
        if spec.kernel in text and any(r.kernel == spec.kernel for r in MetalFile(text).registrations):
            raise PorterError(f"kernel name '{spec.kernel}' is already registered in {rel}; "
                              "host names must be unique across .metal files", path=rel)


def _plan_host(checkout, spec: OpSpec, read, write, plan: Plan) -> None:
    if spec.registered_in:
        if spec.host_path in spec.registered_in:
            write(spec.host_path, read(spec.host_path))
        return
    if spec.scalars:        # creates the family's host file when it has none
        _plan_alpha_host(checkout, spec, read, write, plan)
        return
    created = not checkout.exists(spec.host_path)
    text = family_host.host_text(checkout, spec.host_path, spec.family, spec.stub.header, plan)
    host = HostFile(text, spec.host_path)
    iterator = spec.stub.iterator_type
    if iterator is None or len(spec.stub.params) != 1:
        raise PorterError(f"{spec.stub.name} takes ({', '.join(spec.stub.params)}): porter writes "
                          "host stubs for kernels of one TensorIterator argument",
                          path=spec.stub.header, line=spec.stub.line)
    try:
        if spec.kind == UNARY and host_edit.uses_ti_macro(host, spec.stub.name, spec.kernel,
                                                          iterator, len(spec.stub.params)):
            new = host_edit.add_ti_dispatch(text, spec.kernel)
        else:
            new = host_edit.add_kernel_function(text, stub=spec.stub.name,
                                                function=host_edit.kernel_function_name(text, spec.kernel),
                                                kernel=spec.kernel, iterator=iterator, kind=spec.kind)
    except ValueError as err:
        raise PorterError(str(err), path=spec.host_path,
                          hint="is the file complete? porter adds the host stub before it") from None
    if new != text:
        new = host_edit.include_stub_header(new, spec.stub.header)
    if created:
        new = host_edit.uses_includes(new)
    write(spec.host_path, new)
    hosts = {rel: read(rel) for rel in {*checkout.glob(co.OPERATIONS, "*.mm"), spec.host_path}}
    validate.stub_registered_once(hosts, spec.stub.name)
    validate.kernel_registered(read(spec.metal_path), spec.metal_path, spec.kernel)


def _plan_alpha_host(checkout, spec: OpSpec, read, write, plan: Plan) -> None:
    """The host kernel function of an op with scalars: the stub's parameters, named as the
    schema names them, turned into the kernel's alpha or params struct."""
    created = not checkout.exists(spec.host_path)
    text = family_host.host_text(checkout, spec.host_path, spec.family, spec.stub.header, plan)
    iterator = spec.stub.iterator_type
    params_struct = scalar_args.uses_params_struct(spec.scalars)
    struct = scalar_args.struct_name(spec.kernel) if params_struct else None
    function = host_edit.kernel_function_name(text, spec.kernel)
    try:
        fields = [(a.name, scalar_args.host_value(a)) for a in spec.scalars] if struct else []
        fields_long = [(a.name, scalar_args.host_value_long(a)) for a in spec.scalars] \
            if struct and plan.long_params else []
    except ValueError as err:
        raise PorterError(f"'{spec.op}': {err}, so porter cannot tell what the kernel should receive "
                          "when it is None", path=spec.stub.header, line=spec.stub.line,
                          hint="write the host function by hand") from None
    source = render("alpha_host_kernel.mm.j2", function=function, iterator=iterator,
                    parameters=scalar_args.host_parameters(spec.scalars), struct=struct,
                    fields=fields, fields_long=fields_long, kind=spec.kind, kernel=spec.kernel,
                    dtype_limits=scalar_args.needs_dtype_limits(spec.scalars),
                    scalar=spec.scalars[0].name)
    try:
        new = host_edit.add_kernel_function(text, stub=spec.stub.name, function=function,
                                            kernel=spec.kernel, iterator=iterator, kind=spec.kind,
                                            source=source)
    except ValueError as err:
        raise PorterError(str(err), path=spec.host_path,
                          hint="is the file complete? porter adds the host stub before it") from None
    new = host_edit.ensure_include(new, "ATen/native/" + spec.stub.header.rsplit("/", 1)[-1])
    if "AT_DISPATCH_" in source:
        # the dtype extremes' dispatch: no header the host files include defines AT_DISPATCH_*
        # (a Mac's build said "use of undeclared identifier 'scalar_t'", porter.emulate.host_compile)
        new = host_edit.ensure_include(new, "ATen/Dispatch.h")
    if struct:
        metal_text = read(spec.metal_path) if (checkout.exists(spec.metal_path) or
                                               spec.metal_path in plan.changes.changes) else ""
        new = host_edit.ensure_include(new, params_header(spec.metal_path, metal_text).split(
            "aten/src/", 1)[-1])
    if created:
        new = host_edit.uses_includes(new)
    write(spec.host_path, new)
    hosts = {rel: read(rel) for rel in {*checkout.glob(co.OPERATIONS, "*.mm"), spec.host_path}}
    validate.stub_registered_once(hosts, spec.stub.name)
    validate.kernel_registered(read(spec.metal_path), spec.metal_path, spec.kernel)




def _plan_in_place_host(checkout, spec: OpSpec, read, write, plan: Plan) -> None:
    """The op's own impl calls the kernel on its iterator; its MPSGraph helpers go."""
    place = spec.in_place
    text = read(place.path)
    source = source_of(text)
    impl = next((d for d in source.named({place.function}) if d.shape == "impl"), None)
    if impl is None:
        raise PorterError(f"TORCH_IMPL_FUNC({place.function}) is no longer in this file",
                          path=place.path, hint="rerun porter on the current tree")
    if not source.is_metal(impl):
        new, removed = in_place_edit.replace_body(text, impl, spec.kernel, spec.kind)
        plan.removed += [{"path": place.path, "line": r.line, "what": r.what, "name": r.name}
                         for r in removed]
        text = new
    if not in_place_edit.has_library(text):
        try:
            text = in_place_edit.add_library(text, spec.metal_path.rsplit("/", 1)[-1].rsplit(".", 1)[0])
        except ValueError as err:
            raise PorterError(str(err), path=place.path) from None
        plan.notes.append(f"{place.path}: declares the bundled kernel library (`lib`) its new "
                          "Metal call uses")
    write(place.path, text)
    validate.kernel_registered(read(spec.metal_path), spec.metal_path, spec.kernel)


def _plan_expectations(checkout, spec: OpSpec, read, write, plan: Plan) -> None:
    if checkout.exists(co.COMMON_MPS) and spec.xfail_keys:
        old = read(co.COMMON_MPS)
        new, others = xfail_edit.remove_unimplemented(old, co.COMMON_MPS, spec.xfail_keys,
                                                      keep_dtypes=plan.refused | plan.unregistered)
        if new != old:
            validate.python_file(new, co.COMMON_MPS)
            write(co.COMMON_MPS, new)
        for e in others:
            dtypes = "all dtypes" if e.dtypes is None else ", ".join(e.dtypes)
            if set(e.dtypes or ()) & plan.refused:
                why = "the port registers no kernel for dtypes the CPU reference refuses"
            else:
                why = f"run `porter test {spec.op} --prune-xfails` to prune what passes"
            plan.notes.append(f"{co.COMMON_MPS}:{e.line}: {e.dict_name}['{e.key}'] ({dtypes}) left "
                              f"in place; {why}")
    _note_fallback_example(checkout, spec, plan)
    by_file: dict[str, list] = {}
    for source in (*spec.opinfos, *spec.refs):
        by_file.setdefault(source.path, []).append(source)
    for path, sources in by_file.items():
        old = read(path)
        new, kept = opinfo_edit.remove_expected_failures(old, sources)
        for deco in kept:
            kind = "expectedFailure" if deco.expected_failure else "decorator"
            what = " ".join(x for x in (deco.test_class, deco.test_name, ", ".join(deco.dtypes)) if x)
            plan.notes.append(f"{path}:{deco.line}: MPS {kind} ({what}) kept: it is not about the "
                              f"missing kernel; check it on a Mac: {opinfo_edit.mac_command(deco)}")
        if new != old:
            _validate_calls(new, sources, path)
            write(path, new)


def _note_fallback_example(checkout, spec: OpSpec, plan: Plan) -> None:
    """TestFallbackWarning needs an op with no MPS kernel; porting the one it uses breaks it
    (`porter check` finds it afterwards: PORTER032)."""
    if not checkout.exists(co.TEST_MPS):
        return
    example = fallback_example.named_ops(checkout.read(co.TEST_MPS))
    if example is not None and spec.op in example[1]:
        plan.notes.append(f"{co.TEST_MPS}:{example[0]}: TestFallbackWarning uses {spec.op} as its "
                          "not-implemented example; change it to an op that still lacks MPS")


def _validate_calls(new: str, sources, path: str) -> None:
    """Each edited OpInfo call still parses; cuts happen inside calls, so starts shift by the
    text removed from the calls before them."""
    removed = 0
    for source in sorted(sources, key=lambda s: s.start):
        start = source.start - removed
        end = call_span(new, start)
        if end < 0:
            raise PorterError("edit would break the OpInfo call", path=path, line=source.line)
        validate.python_slice(new, start, end, path)
        removed += (source.end - source.start) - (end - start)
