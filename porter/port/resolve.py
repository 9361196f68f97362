"""Resolve an op name against a checkout into one frozen `OpSpec`: every fact, read once.

Principles (after torchgen's model.py):
- Resolution is read-only and happens once, up front; edit planners only consume an OpSpec.
- Every fact that an error may cite carries its location (path and line).
- Unknown or unsupported ops fail here, with a one-line reason and a suggestion.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source import native_yaml, op_kind
from porter.port.body import bool_valued
from porter.source.cpu_kernel import (ScalarLambda, meta_promotes_to_float, none_conventions,
                                     scalar_lambda, shared_function_stubs)
from porter.source.native_definitions import impl_stubs, iterator_inputs
from porter.errors import NotAnOp, PorterError
from porter.source.host_scan import HostFile
from porter.source.metal_scan import MetalFile
from porter.source.opinfo_source import OpInfoSource, for_op, mps_dtypes
from porter.source.stubs import Stub, parse_header
from porter.port import scalars as scalar_args
from porter.port.scalars import ScalarArg

UNARY, BINARY, TERNARY = op_kind.UNARY, op_kind.BINARY, op_kind.TERNARY
UNPORTED, MPSGRAPH, NATIVE = "unported", "mpsgraph", "native"
PAIRS = {UNARY: "UnaryKernel", BINARY: "BinaryKernel"}
# Stubs declared in this header get their kernels in this family's .metal/.mm, as upstream's
ACTIVATION_HEADER, ACTIVATION = "Activation.h", "ActivationKernel"


class MpsGraphImpl(NamedTuple):
    """Where an op still runs through MPSGraph."""

    shape: str            # "row" (MPS: x_mps in the yaml) or "stub" (REGISTER_MPS_UNARY_STUB)
    functions: tuple[str, ...]
    path: str
    line: int


class InPlace(NamedTuple):
    """A port that keeps the op's own `MPS: <op>_out_mps` row and replaces the MPSGraph body of
    its `TORCH_IMPL_FUNC` by a call of the Metal kernel on the structured iterator (`*this`)."""

    function: str        # sigmoid_backward_out_mps
    path: str            # the host file that defines it
    line: int
    reason: str          # why the shared row could not be used (or "--in-place")


class OpSpec(NamedTuple):
    op: str
    kind: str                               # unary | binary | ternary
    state: str                              # unported | mpsgraph | native
    entries: tuple[native_yaml.Entry, ...]  # the op's family in native_functions.yaml
    backend_entries: tuple[native_yaml.Entry, ...]   # those with CPU/CUDA rows
    cpu_kernel: str                         # shared structured kernel, e.g. heaviside_out
    stub: Stub
    kernel: str                             # Metal kernel (host_name prefix)
    metal_path: str
    host_path: str
    opinfos: tuple[OpInfoSource, ...]
    refs: tuple[OpInfoSource, ...]
    dtypes: frozenset[str]                  # torch dtype names to register on MPS
    promotes_int_to_float: bool
    returns_bool: bool
    scalar_lambda: ScalarLambda | None
    registered_in: tuple[str, ...] = ()     # host files that already register the stub
    mpsgraph: tuple[MpsGraphImpl, ...] = ()
    notes: tuple[str, ...] = ()
    # the functor's parameter names: a backward op's schema names (grad_output, output);
    # empty for forward ops, whose functors take x, or a and b
    arg_names: tuple[str, ...] = ()
    in_place: InPlace | None = None
    backward: bool = False
    scalars: tuple[ScalarArg, ...] = ()     # schema scalars the kernel receives, in order
    # why the stub is an assumption, or "": the shared kernel's body (which stub it runs, per
    # dtype) is in no native .cpp of the checkout, and `<op>_stub` was taken without reading it
    stub_unread: str = ""

    @property
    def family(self) -> str:
        """UnaryKernel, BinaryKernel or ActivationKernel: the .metal/.mm pair of the kernel."""
        return self.metal_path.rsplit("/", 1)[-1].removesuffix(".metal")

    @property
    def xfail_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.xfail_key for o in self.opinfos))


def resolve(checkout: co.Checkout, op: str, in_place: bool = False) -> OpSpec:
    """Every fact about `op`; `in_place` asks for the in-place port even when a shared row is
    possible (`--in-place`)."""
    op = op.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", op or "-"):
        raise NotAnOp(f"'{op}' is not an operator name", hint="e.g. porter new-op heaviside")
    op = op.replace(".", "_", 1) if op.startswith(("special.", "linalg.", "fft.")) else op
    yaml_text = checkout.read(co.NATIVE_YAML)
    if "." in op:       # an overload: porter edits every overload of the op at once
        base = op.split(".", 1)[0]
        if not native_yaml.entries_named(yaml_text, {base, base + "_"}):
            # a dotted name whose head is no op (an OpInfo name porter could not map)
            raise NotAnOp(f"'{op}' is neither an aten op nor an OpInfo name of the checkout",
                          hint="pass the op's native_functions.yaml name, e.g. heaviside")
        raise NotAnOp(f"'{op}' names one overload of '{base}': porter ports all overloads "
                      "of an op together", hint=f"pass the op name, '{base}'")
    fam = native_yaml.entries_named(yaml_text, {op, op + "_"})
    if not fam:
        names = sorted(native_yaml.op_names(native_yaml.scan(yaml_text)))
        import difflib      # only on this error path: it costs ~10 ms to import

        close = difflib.get_close_matches(op, names, n=3, cutoff=0.75)
        hint = f"did you mean {', '.join(close)}?" if close else "check the spelling"
        raise NotAnOp(f"unknown operator '{op}': no '- func: {op}' entry",
                      path=co.NATIVE_YAML, hint=hint)
    backend = [e for e in fam if e.dense_rows()]
    hosts = _host_files(checkout)
    # Not structured, yet portable when CPU and CUDA share one function that runs a stub on a
    # TensorIterator (logit_out, nan_to_num_out), which MPS can join as they do.
    shared: dict[str, list[str]] = {}
    classified, out_entry = op_kind.classify_family(
        fam, runs_stub=lambda e: bool(shared.setdefault("stubs", shared_function_stubs(checkout, e))))
    shared_stubs = shared.get("stubs")
    if not classified.portable:
        err = _not_portable(op, fam, out_entry, hosts, classified)
        # the reason is the same on every surface; the hint names what a port would need
        err.hint = _what_is_missing(checkout, fam, out_entry, classified) or err.hint
        raise err
    kind = {1: UNARY, 2: BINARY}.get(len(classified.tensors), TERNARY)     # scalars or not
    with_scalars = classified.shape in (op_kind.ALPHA, op_kind.SCALAR, op_kind.TERNARY)
    graph = _mpsgraph_impls(fam, hosts, op)
    place = None
    try:
        cpu_kernel = _shared_kernel(out_entry)
        stub = _find_stub(checkout, op, cpu_kernel, out_entry, shared_stubs)
    except PorterError as err:
        # an in-place port writes no host function that could pass scalars
        place = None if with_scalars else _in_place(checkout, op, out_entry, hosts, err.message)
        if place is None:
            raise
        cpu_kernel, stub = "", NO_STUB
    if in_place and with_scalars:
        raise PorterError(f"'{op}' cannot be ported in place: porter passes scalar arguments "
                          "through a host function registered on the stub, which an in-place port "
                          "has not", path=co.NATIVE_YAML, line=out_entry.lineno,
                          hint=f"drop --in-place: porter new-op {op} / migrate-from-mpsgraph {op}")
    if in_place and place is None:
        place = _in_place(checkout, op, out_entry, hosts, "--in-place")
        if place is None:
            raise PorterError(f"'{op}' cannot be ported in place: {_why_not_in_place(out_entry, hosts)}",
                              path=co.NATIVE_YAML, line=out_entry.lineno,
                              hint=f"drop --in-place: porter new-op {op} / migrate-from-mpsgraph {op}")
    if place is not None:
        return _in_place_spec(checkout, op, kind, fam, backend, out_entry, stub, place, graph, hosts)
    reaches_own = _check_route(checkout, op, cpu_kernel, out_entry, hosts, yaml_text)
    notes = _ignored_bools(checkout, op, out_entry, stub)      # first: its refusal is the exact one
    scalars = _check_stub_scalars(checkout, op, out_entry, stub,
                                  scalar_args.schema_scalars(native_yaml.arguments(out_entry.schema))[0],
                                  cpu_kernel)
    stub_hosts = _naming(hosts, stub.name.removesuffix("_stub"))
    registered = tuple(sorted(path for path, host in stub_hosts.items()
                              if any(r.stub == stub.name for r in host.dispatch_registrations)))
    state = _state(fam, registered, graph)
    # the shared kernel's body is not in the checkout: which stub it runs (sgn_out runs
    # sign_stub for real inputs, sub_out add_stub) cannot be read; planning a port refuses it
    unread = "" if shared_stubs or _impl_read(checkout, cpu_kernel) else (
        f"'{op}': not proven: MPS would join {cpu_kernel}, whose body is in no {co.NATIVE}/*.cpp "
        f"of this checkout (no TORCH_IMPL_FUNC({cpu_kernel})), so which DispatchStub it runs "
        f"for each dtype cannot be read; porter does not assume {stub.name}; nothing was written")
    opinfos, refs = for_op(checkout, op)
    lam = scalar_lambda(checkout, stub.name, op)
    promotes = (any(o.flag("promotes_int_to_float") for o in opinfos)
                or meta_promotes_to_float(checkout, op))
    dtypes = mps_dtypes(opinfos)
    backward = out_entry.is_backward
    if backward:
        dtypes = backward_dtypes(checkout, op)
    if reaches_own is not None:
        # the other dtypes run another stub's kernel (sgn_out: sign_stub for real inputs)
        dtypes = frozenset(d for d in dtypes if d.startswith("complex") == (reaches_own == "complex"))
    # a bool lambda, or an OpInfo that says so (`always_returns_bool`: the meta function builds a
    # bool-output iterator, as logical_and_out's comparison_op does)
    returns_bool = bool(lam and lam.return_type == "bool") or any(
        o.flag("always_returns_bool") for o in opinfos) or bool_valued(lam)
    kernel = _existing_kernel(stub_hosts, stub.name) or kernel_name(op, stub.name)
    if backward and kernel != op:
        # one kernel for every op on the stub (threshold_backward's is threshold's): written
        # for the dtypes each of them sends, so porting the others later adds no kernel
        dtypes = dtypes | _stub_siblings_dtypes(checkout, op, stub.name)
    # a ternary op's kernels live beside the host file named after its stub's header
    # (PointwiseOps.h: PointwiseOps.mm and PointwiseOps.metal, as upstream's addcmul)
    pair = (stub.header.rsplit("/", 1)[-1].removesuffix(".h") if kind == TERNARY
            else _family(checkout, stub, graph, hosts, scalars, kind))
    return OpSpec(
        op=op, kind=kind, state=state, entries=tuple(fam), backend_entries=tuple(backend),
        cpu_kernel=cpu_kernel, stub=stub, kernel=kernel,
        metal_path=f"{co.KERNELS}/{pair}.metal", host_path=f"{co.OPERATIONS}/{pair}.mm",
        opinfos=tuple(opinfos), refs=tuple(refs), dtypes=dtypes,
        promotes_int_to_float=promotes and not returns_bool and not backward,
        returns_bool=returns_bool, scalar_lambda=lam, registered_in=registered, mpsgraph=graph,
        arg_names=_arg_names(out_entry, iterator_inputs(checkout, op)) if backward else (),
        backward=backward, scalars=scalars, notes=notes, stub_unread=unread)


def _stub_siblings_dtypes(checkout: co.Checkout, op: str, stub: str) -> frozenset[str]:
    """The MPS test dtypes of the forward ops whose `_out` function calls `stub` too."""
    from porter.source.native_definitions import ops_calling
    found: set[str] = set()
    for other in sorted(ops_calling(checkout.root, stub) - {op}):
        if not other.endswith("_backward"):
            found |= mps_dtypes(for_op(checkout, other)[0])
    return frozenset(found)


def _ignored_bools(checkout, op: str, entry, stub: Stub) -> tuple[str, ...]:
    """A backward op's `bool` arguments no kernel receives: its stub takes none (then the
    port passes none, as the CPU and CUDA kernels do), said with where the meta function
    checks it; a stub that does take one is refused."""
    bools = op_kind.ignored_bools(native_yaml.arguments(entry.schema).others)
    if not bools:
        return ()
    if any(scalar_args.parameter_type(p).endswith("bool") for p in stub.params[1:]):
        raise PorterError(f"'{op}': {stub.name} hands its kernel the bool {', '.join(bools)}: porter "
                          "passes Scalar and float arguments to a Metal kernel, a bool needs a "
                          "params-struct field written by hand", path=stub.header, line=stub.line,
                          hint="write this op's MPS host function by hand")
    where = _meta_function(checkout, op)
    checked = f"; {where} checks it" if where else ""
    return tuple(f"{op}'s `bool {b}` is not passed to the kernel: {stub.name}'s kernel takes no "
                 f"bool (the CPU and CUDA kernels ignore it too){checked}" for b in bools)


def _meta_function(checkout, op: str) -> str | None:
    """`file:line` of TORCH_META_FUNC(op) in the checkout's native .cpp files."""
    for rel in _likely_first(checkout.glob(co.NATIVE, "*.cpp")):
        text = checkout.read(rel)
        m = re.search(rf"TORCH_META_FUNC\(\s*{re.escape(op)}\s*\)", text)
        if m:
            return f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
    return None


METALLIB_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<ATen/native/mps/(\w+)_metallib\.h>", re.M)
# A port in place has no DispatchStub of its own to register.
NO_STUB = Stub("", "", "", "", 0)
# What a backward kernel computes in: gradients are floating point (upstream's
# test_output_grad_match sends float32 and float16; bfloat16 runs the same kernel)
BACKWARD_DTYPES = frozenset({"float32", "float16", "bfloat16"})


def backward_dtypes(checkout: co.Checkout, op: str) -> frozenset[str]:
    """The dtypes a backward op's kernel receives: the floating dtypes its forward op's
    OpInfos test on MPS (float32, float16, bfloat16 when no forward OpInfo is found)."""
    from porter.source.derivatives import forward_of
    forward = forward_of(checkout, op)
    if forward is None:
        return BACKWARD_DTYPES
    opinfos, _ = for_op(checkout, forward.op)
    found = mps_dtypes(opinfos) & BACKWARD_DTYPES
    return found or BACKWARD_DTYPES


def _arg_names(entry: native_yaml.Entry, order: tuple[int, ...] | None = None) -> tuple[str, ...]:
    """The functor's tensor arguments: the schema's names, in the order the meta function's
    iterator reads them (threshold_backward's `self` before its `grad_output`)."""
    names = tuple(native_yaml.argument_name(a) for a in native_yaml.arguments(entry.schema).tensors)
    if order and sorted(order) == list(range(len(names))):
        return tuple(names[i] for i in order)
    return names


def _in_place(checkout, op: str, out_entry, hosts, reason: str) -> InPlace | None:
    """The op's own structured MPS impl, which an in-place port keeps, or None."""
    if out_entry.fields.get("structured") != "True":
        return None
    from porter.source.mpsgraph_scan import source_of
    for row in out_entry.mps_rows():
        if not row.kernel.endswith("_mps"):
            continue
        for rel, host in _naming(hosts, row.kernel).items():
            for d in source_of(host.text).named({row.kernel}):
                if d.shape == "impl":
                    return InPlace(row.kernel, rel, d.line, reason)
    return None


def own_mps_impl(checkout, op: str, out_entry, reason: str) -> InPlace | None:
    """The op's own structured MPS impl (`TORCH_IMPL_FUNC(<op>_out_mps)`), or None."""
    return _in_place(checkout, op, out_entry, _host_files(checkout), reason)


def arg_names_of(checkout, op: str, out_entry) -> tuple[str, ...]:
    """A backward op's functor arguments: its schema's tensors in its iterator's order."""
    return _arg_names(out_entry, iterator_inputs(checkout, op))


def _why_not_in_place(out_entry, hosts) -> str:
    if out_entry.fields.get("structured") != "True":
        return (f"{out_entry.full_name} is not structured, so there is no TORCH_IMPL_FUNC iterator "
                "to run the kernel on (build a TensorIteratorConfig by hand)")
    rows = [r.kernel for r in out_entry.mps_rows()]
    if not rows:
        return f"{out_entry.full_name} has no MPS row of its own"
    return f"no TORCH_IMPL_FUNC({rows[0]}) in {co.OPERATIONS}/*.mm"


def _in_place_spec(checkout, op, kind, fam, backend, out_entry, stub, place: InPlace, graph,
                   hosts) -> OpSpec:
    opinfos, refs = for_op(checkout, op)
    backward = out_entry.is_backward
    dtypes = backward_dtypes(checkout, op) if backward else mps_dtypes(opinfos)
    lam = scalar_lambda(checkout, stub.name) if stub.name else None
    from porter.source.mpsgraph_scan import source_of
    impl = next(d for d in source_of(hosts[place.path].text).named({place.function}))
    state = NATIVE if source_of(hosts[place.path].text).is_metal(impl) else MPSGRAPH
    # as for a shared row: a bool lambda, or an OpInfo that says the op always returns bool
    # (logical_not, whose --complex-body port was written float -> float)
    returns_bool = bool(lam and lam.return_type == "bool") or any(
        o.flag("always_returns_bool") for o in opinfos)
    # JIT-shader builds give the host file only the kernels of the .metal files whose
    # *_metallib.h it includes: the kernel goes there; else into its family's file, as for a
    # shared row (an activation whose MPSGraph code is Activation.mm's: ActivationKernel.metal)
    loaded = [f"{co.KERNELS}/{stem}.metal" for stem in METALLIB_INCLUDE_RE.findall(hosts[place.path].text)]
    family = family_of(stub.header if stub.name else "",
                       place.path == f"{co.OPERATIONS}/{ACTIVATION_MPSGRAPH}", False,
                       checkout.exists(f"{co.KERNELS}/{ACTIVATION}.metal"), kind)
    metal_path = next((p for p in loaded if checkout.exists(p)), f"{co.KERNELS}/{family}.metal")
    return OpSpec(
        op=op, kind=kind, state=state, entries=tuple(fam), backend_entries=tuple(backend),
        cpu_kernel="", stub=stub, kernel=op, metal_path=metal_path,
        host_path=place.path, opinfos=tuple(opinfos), refs=tuple(refs), dtypes=dtypes,
        promotes_int_to_float=False, returns_bool=returns_bool, scalar_lambda=lam,
        mpsgraph=graph if state == MPSGRAPH else (), arg_names=_arg_names(out_entry) if backward else (),
        in_place=place, backward=backward)


UNDEFINED = f"which no {co.OPERATIONS}/*.mm porter can read defines"


def defined_mps_functions(checkout: co.Checkout, names) -> set[str]:
    """Those of `names` (functions an MPS row names) that a host file defines: a refusal names
    an MPS function as the op's only if it exists (torch 2.13's yaml names add_out_mps, which a
    checkout may lack)."""
    from porter.source.mpsgraph_scan import source_of

    names, found = set(names), set()
    for rel in checkout.glob(co.OPERATIONS, "*.mm"):
        text = checkout.read(rel)
        if any(n in text for n in names - found):
            found |= {d.name for d in source_of(text).named(names)}
    return found


def _what_is_missing(checkout, fam, out_entry, kind: op_kind.OpKind) -> str:
    """For a refusal a porter feature would lift, the hint naming that feature (issue 13: gelu's
    str, add's ufunc kernels, a backward op's scalars); "" keeps the refusal's own hint (a
    reduction, a dim: their reason says it)."""
    if kind.reason == op_kind.UFUNC:
        entry = next((e for e in fam if op_kind.writes_out(e)), fam[0])
        scalars = [a for a in native_yaml.arguments(entry.schema).others
                   if native_yaml.argument_type(a).rstrip("?") in op_kind.KERNEL_SCALAR_TYPES]
        # the way left without a stub is in place, and porter's in-place ports pass no scalars
        hint = (f"what is missing: an in-place port that passes {', '.join(scalars)} to the kernel "
                "(porter's in-place ports pass no scalars); ") if scalars else ""
        mps = next((r.kernel for r in entry.mps_rows()), "")
        if mps and not defined_mps_functions(checkout, {mps}):
            runner = (f"{mps} (named by its MPS row; no {co.OPERATIONS}/*.mm porter can read defines "
                      "it yet: write it)")
        elif mps:
            runner = f"{mps} (its MPS row)"
        else:
            runner = "an MPS function named by its own MPS row"
        base = entry.name.split(".")[0]
        for rel in checkout.glob(co.KERNELS, "*.metal"):
            names = {r.kernel for r in MetalFile(checkout.read(rel), rel).registrations}
            kernel = next((k for k in (f"{base}_alpha", base) if k in names), None)
            if kernel:
                return hint + f"{rel} already registers {kernel}: call it by hand from {runner}"
        return hint + f"write its Metal kernel by hand, run by {runner}"
    if out_entry is None:
        return ""
    if kind.strings and kind.reason.startswith("takes a str argument"):
        kernels = sorted({d.kernel for d in out_entry.dense_rows()})
        mps = next((r.kernel for r in out_entry.mps_rows()), "")
        op = out_entry.name.split(".")[0]
        if len(kernels) > 1 and mps and out_entry.fields.get("structured") == "True":
            # porter.port.enum_port: one functor per branch of the CPU kernel, picked in the host
            return (f"porter migrate-from-mpsgraph {op} ports it as upstream's gelu: one functor per "
                    f"value of {', '.join(native_yaml.argument_name(s) for s in kind.strings)}, "
                    f"picked by a host function on its stub, which {mps} runs with kMPS")
        return (f"what is missing: a host that passes {', '.join(kind.strings)} by picking one "
                "Metal kernel per value of the string")
    return _not_one_functor_hint(checkout, out_entry, kind)


def _not_one_functor_hint(checkout, out_entry, kind: op_kind.OpKind) -> str:
    """What a contributor writes by hand for an op that is not one functor (a reduction, an op
    along a dim), naming the MPS function its row calls and, where
    the checkout says, the stub its CPU kernel runs for the elementwise part."""
    op = out_entry.name.split(".")[0]
    mps = next((r.kernel for r in out_entry.mps_rows()), "") or f"{op}_out_mps"
    if kind.reason.startswith("reduces its result"):
        stub = _cpu_impl_stub(checkout, out_entry)
        part = (f"on CPU, {stub} computes it on a TensorIterator and the reduction follows: register a "
                f"Metal kernel on {stub} (one binary functor) and MPS can share the CPU function"
                if stub else "a binary functor of the inputs, one element at a time")
        return (f"what is missing: porter writes one functor and its registrations; this op is an "
                f"elementwise part ({part}) followed by a reduction on the host for "
                f"reduction=Mean/Sum (at::mean_out/at::sum_out of that output); write {mps} by hand: "
                "the elementwise kernel into a temporary, then the reduction, or the output itself "
                "for reduction=None")
    if kind.reason.startswith("works along a dimension"):
        return (f"what is missing: a functor sees one element of each input at one index; {op} "
                "pairs two elements of one input along dim (the two halves of size/2); write "
                f"{mps} by hand: narrow self into its two halves along dim, build a binary "
                f"TensorIterator over them and run one binary functor (`lib.exec_binary_kernel(iter, "
                f"\"{op}\")`)")
    return ""


def _cpu_impl_stub(checkout, entry) -> str | None:
    """The stub the op's structured CPU kernel runs (mse_loss_out: mse_stub), from the
    checkout's native .cpp files, or None."""
    kernel = next((d.kernel for d in entry.dense_rows() if "CPU" in d.keys), None)
    if kernel is None:
        return None
    for rel in _likely_first(checkout.glob(co.NATIVE, "*.cpp")):
        text = checkout.read(rel)
        if kernel in text:
            stubs = impl_stubs(text).get(kernel)
            if stubs:
                return stubs[0]
    return None


def _not_portable(op: str, fam, out_entry, hosts, kind: op_kind.OpKind) -> PorterError:
    """The one-line refusal for an op of a kind porter does not port (porter.source.op_kind):
    cited at its MPSGraph implementation when it has one, else at its yaml entry."""
    graph = _mpsgraph_impls(fam, hosts, op)
    if graph:
        return PorterError(kind.refusal(op), path=graph[0].path, line=graph[0].line,
                           hint=kind.hint and "write its Metal kernel by hand, run by an MPS "
                                              "function named by its own MPS row")
    return PorterError(kind.refusal(op), path=co.NATIVE_YAML, line=(out_entry or fam[0]).lineno,
                       hint=kind.hint)


def _check_route(checkout, op: str, cpu_kernel: str, out_entry, hosts, yaml_text: str) -> str | None:
    """Refuse an op whose shared kernel does not run `<op>_stub` alone, as porter would register
    it: on MPS a dtype runs whatever kernel the stub its TORCH_IMPL_FUNC calls has registered
    (`sub_out` runs add_stub with -alpha; `sgn_out` runs sign_stub for real inputs). Where the
    other stubs have MPS kernels already, the port is its own stub's for the dtypes that reach
    it: "complex" or "real" (sgn_out's complex inputs), returned; None: every dtype."""
    from porter.source import stub_route
    found = stub_route.routes(checkout, cpu_kernel)
    own = f"{op}_stub"
    if not any(r.stub != own and native_yaml.entries_named(yaml_text, {r.stub.removesuffix("_stub")})
               for r in found):
        # its own stub, maybe not for every dtype (signbit_out fills bool itself), or one of
        # its own overloads' (round_decimals_stub): no other op's kernel is reached
        return
    where = dict(path=found[0].path, line=found[0].line)
    registered = {r.stub: (rel, r.line) for rel, host in hosts.items()
                  for r in host.dispatch_registrations}

    def mps(stub: str) -> str:
        at = registered.get(stub)
        return f"registered for MPS at {at[0]}:{at[1]}" if at else "registered for MPS by no *Kernel.mm"
    unknown = [r for r in found if r.when == stub_route.UNKNOWN]
    if unknown:
        raise PorterError(f"'{op}': {cpu_kernel} calls {', '.join(r.stub for r in found)} under "
                          "conditions porter cannot read, so which kernel each dtype runs on MPS "
                          "is not proven; nothing was written", **where,
                          hint="port it by hand, following the branches of its TORCH_IMPL_FUNC")
    stubs = list(dict.fromkeys(r.stub for r in found))
    if len(stubs) > 1:
        parts = "; ".join(f"{r.when} inputs run {r.stub} ({mps(r.stub)})" for r in found)
        other = next((r for r in found if r.stub != own and r.stub not in registered), None)
        mine = [r.when for r in found if r.stub == own]
        if other is None and len(mine) == 1 and mine[0] in (stub_route.COMPLEX, stub_route.REAL):
            # sign_stub has its kernel: sgn's port is sgn_stub's, for complex inputs
            return mine[0]
        if other is not None:
            first = other.stub.removesuffix("_stub")
            hint = (f"port {first} first (`porter status {first}`), then run this again: {own} "
                    "alone does not give the op's other dtypes a kernel")
        else:
            hint = f"register {own} by hand for the dtypes that reach it; porter ports one stub an op"
        err = PorterError(f"'{op}': {cpu_kernel} does not run {own} alone: {parts}; a port of "
                          f"{own} would leave the others without an MPS kernel", **where, hint=hint)
        # the op porter ports first (`candidates --verify` measures the two ports together)
        err.prerequisite = other.stub.removesuffix("_stub") if other is not None else None
        raise err
    route = found[0]
    other_op = route.stub.removesuffix("_stub")
    if route.stub != own and route.when == stub_route.ALL and scalar_lambda(checkout, route.stub) is not None:
        # a stub the op shares with another (threshold_backward_out runs threshold_stub with its
        # own scalars): its CPU kernel's lambda gives the one Metal kernel both ops run, as
        # shrink_backward_stub's gives the shrink ops' (sub_out's add_stub has none)
        return
    if route.stub != own and route.when == stub_route.ALL and route.stub in registered:
        # the other op's stub has its MPS kernel (sub_out runs add_stub with -alpha, and add's
        # host function is registered): the port is the op's row joining the shared function,
        # which hands that kernel what it passes (-alpha); the emulator follows the same call
        return
    if route.stub != own and native_yaml.entries_named(yaml_text, {other_op}):
        call = f"{route.stub}({', '.join(('iter',) + route.arguments)})"
        kernel = None
        for rel in checkout.glob(co.KERNELS, "*.metal"):
            names = {r.kernel for r in MetalFile(checkout.read(rel), rel).registrations}
            kernel = kernel or next((f"the {k} kernel {rel} registers" for k in
                                     (f"{other_op}_alpha", other_op) if k in names), None)
        raise PorterError(f"'{op}': {cpu_kernel} runs {call}, not {own}: on MPS torch.{op} runs "
                          f"the kernel of {route.stub} ({mps(route.stub)}); porter ports an op "
                          f"through another op's stub once that stub has its MPS kernel", **where,
                          hint=f"register {route.stub} by hand (a host function running "
                               f"{kernel or 'a kernel of ' + other_op} with the scalar it receives), "
                               f"then route {out_entry.full_name}'s MPS row to {cpu_kernel}")


def _shared_kernel(entry: native_yaml.Entry) -> str:
    kernels = {d.kernel for d in entry.dense_rows()}
    if len(kernels) != 1:
        raise PorterError(f"'{entry.full_name}' has different CPU and CUDA kernels ({', '.join(sorted(kernels))}): "
                          "no shared structured kernel for MPS to join",
                          path=co.NATIVE_YAML, line=entry.lineno)
    return kernels.pop()


def _check_stub_scalars(checkout, op: str, entry, stub: Stub, scalars: list[ScalarArg],
                        cpu_kernel: str = "") -> tuple[ScalarArg, ...]:
    """The stub's declared type decides what the host function receives: it must carry the
    op's scalars one for one (the shared CPU/CUDA function may convert them, as logit's
    `float? eps` becomes a Scalar), or as the op's function passes them to a stub it shares
    with another op (threshold_backward_out: `threshold_stub(..., threshold, 0)`)."""
    if not scalars:
        return ()           # the plain path checks the stub's type when it writes the host
    params = stub.params
    passed = stub_scalars(checkout, stub, scalars, cpu_kernel) if stub.iterator_type else None
    if passed is not None:
        scalars = passed
    problem = scalar_args.stub_mismatch(scalars, params) if stub.iterator_type else \
        "the stub's kernel does not take a TensorIterator first"
    if problem:
        schema = entry.schema.split(" -> ")[0]
        raise PorterError(f"'{op}': {problem}: {schema} vs {stub.fn_type} = {stub.signature} "
                          f"({stub.header}:{stub.line})", path=co.NATIVE_YAML, line=entry.lineno,
                          hint="write this op's MPS host function by hand")
    conventions = none_conventions(checkout, stub.name) if any(
        scalar_args.STUB_OPTIONAL_RE.match(scalar_args.parameter_type(p)) for p in params[1:]) else None
    return scalar_args.with_stub_types(scalars, params, conventions)


def _impl_read(checkout: co.Checkout, cpu_kernel: str) -> bool:
    """Whether the checkout's native .cpp files define `cpu_kernel` (TORCH_IMPL_FUNC or a
    CREATE_*TORCH_IMPL_FUNC line): the stub calls porter reads come from there."""
    for rel in _likely_first(checkout.glob(co.NATIVE, "*.cpp")):
        text = checkout.read(rel)
        if cpu_kernel in text and impl_stubs(text).get(cpu_kernel) is not None:
            return True
    return False


def stub_scalars(checkout, stub: Stub, scalars: list[ScalarArg], cpu_kernel: str) -> list[ScalarArg] | None:
    """The stub's parameters as `cpu_kernel` fills them when the stub takes more scalars than the
    op has (porter.port.scalars.through_call), else None."""
    if len(stub.params) - 1 <= len(scalars) or not cpu_kernel:
        return None
    from porter.source import stub_route
    from porter.source.cpu_kernel import stub_parameter_names
    calls = [r for r in stub_route.routes(checkout, cpu_kernel) if r.stub == stub.name]
    if len(calls) != 1 or calls[0].when != stub_route.ALL:
        return None
    return scalar_args.through_call(scalars, list(calls[0].arguments),
                                    stub_parameter_names(checkout, stub.name))


def _find_stub(checkout: co.Checkout, op: str, cpu_kernel: str, entry,
               shared: list[str] | None = None) -> Stub:
    """The stub the shared kernel calls: from its TORCH_IMPL_FUNC (or the plain function's
    body, `shared`), else `<op>_stub`."""
    names = list(shared or [])
    for rel in _likely_first(checkout.glob(co.NATIVE, "*.cpp")):
        text = checkout.read(rel)
        if cpu_kernel not in text:
            continue
        stubs = impl_stubs(text).get(cpu_kernel)
        if stubs is not None:
            names += stubs
            break
    names.append(f"{op}_stub")
    for name in dict.fromkeys(names):
        for rel in _likely_first(checkout.glob(co.NATIVE, "*.h")):
            text = checkout.read(rel)
            if name in text:
                stub = parse_header(text, rel).get(name)
                if stub:
                    return stub
    raise PorterError(f"'{op}': no DispatchStub declared for its kernel {cpu_kernel} "
                      f"(looked for {', '.join(dict.fromkeys(names))} in {co.NATIVE}/*.h)",
                      path=co.NATIVE_YAML, line=entry.lineno,
                      hint="without a stub, MPS needs its own kernel: write it by hand behind its own MPS row")


# Where elementwise stubs and their structured kernels live upstream: looked at first, so
# that most ops never read the other ~100 headers and ~150 sources of aten/src/ATen/native.
LIKELY_STEMS = ("UnaryOps", "BinaryOps", "PointwiseOps", "Pow", "Lerp", "TensorCompare",
                "Activation", "ReduceOps", "Fill")


def _likely_first(paths: list[str]) -> list[str]:
    def rank(path: str) -> int:
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        return LIKELY_STEMS.index(stem) if stem in LIKELY_STEMS else len(LIKELY_STEMS)
    return sorted(paths, key=rank)


def _host_files(checkout: co.Checkout) -> dict[str, HostFile]:
    return {rel: HostFile(checkout.read(rel), rel) for rel in checkout.glob(co.OPERATIONS, "*.mm")}


def _mpsgraph_impls(fam, hosts: dict[str, HostFile], op: str) -> tuple[MpsGraphImpl, ...]:
    found = [MpsGraphImpl("row", (row.kernel,), co.NATIVE_YAML, row.lineno) for row in mpsgraph_rows(fam)
             if not _runs_metal(hosts, row.kernel)]
    for rel, host in _naming(hosts, op).items():
        if op in host.mpsgraph_stubs:
            selector, line = host.mpsgraph_stubs[op]
            found.append(MpsGraphImpl("stub", (selector,), rel, line))
    return tuple(found)


def _runs_metal(hosts: dict[str, HostFile], function: str) -> bool:
    """An op's own MPS function that already calls a Metal kernel (ported in place)."""
    from porter.source.mpsgraph_scan import source_of
    for host in _naming(hosts, function).values():
        source = source_of(host.text)
        defs = source.named({function})
        if defs and all(source.is_metal(d) for d in defs):
            return True
    return False


def mpsgraph_rows(fam) -> list[native_yaml.DispatchLine]:
    """MPS rows naming an MPS-only `*_mps` function: MPSGraph's, unless its definition says
    otherwise (status and candidates read the definition; a port deletes it)."""
    return [row for e in fam for row in e.mps_rows() if row.kernel.endswith("_mps")]


def _state(fam, registered, graph) -> str:
    if graph:
        return MPSGRAPH
    has_mps = any(e.mps_rows() for e in fam)
    return NATIVE if has_mps and registered else UNPORTED


def _naming(hosts: dict[str, HostFile], word: str) -> dict[str, HostFile]:
    """The host files whose text holds `word`: a checkout has ~100, and scanning one costs a
    code mask, so the others are never scanned."""
    return {rel: host for rel, host in hosts.items() if word in host.text}


def _family(checkout, stub: Stub, graph: tuple[MpsGraphImpl, ...], hosts: dict[str, HostFile],
            scalars, kind: str) -> str:
    graph_host = hosts.get(f"{co.OPERATIONS}/{ACTIVATION_MPSGRAPH}")
    in_activation_mm = graph_host is not None and any(
        re.search(rf"\b{re.escape(f)}\b", graph_host.text) for g in graph for f in g.functions)
    return family_of(stub.header, in_activation_mm, bool(scalars),
                     checkout.exists(f"{co.KERNELS}/{ACTIVATION}.metal"), kind)


def family_of(stub_header: str, in_activation_mm: bool, with_scalars: bool,
              has_activation_metal: bool, kind: str) -> str:
    """The .metal/.mm pair a port writes to: where the op's family lives, as upstream moves
    them. An activation (its stub declared in Activation.h, or its MPSGraph implementation in
    operations/Activation.mm: sigmoid_backward's stub is BinaryOps.h's) goes to
    ActivationKernel beside hardshrink and leaky_relu when the checkout has that file (an op
    with scalars whose stub is Activation.h's creates the host file: it goes there
    regardless); every other op to the Unary/Binary pair of its kind. One rule for the
    commands and `candidates`."""
    own_header = stub_header.endswith("/" + ACTIVATION_HEADER)
    if (own_header or in_activation_mm) and (own_header and with_scalars or has_activation_metal):
        return ACTIVATION
    return PAIRS[kind]


# The MPSGraph implementations of the activation family
ACTIVATION_MPSGRAPH = "Activation.mm"


def kernel_name(op: str, stub: str) -> str:
    """The Metal kernel a new port writes: named after the op, or after its stub where several
    ops share one (`shrink_backward_stub` serves hardshrink_backward and softshrink_backward:
    one `shrink_backward` functor, one host function, as upstream's)."""
    base = stub.removesuffix("_stub")
    if stub.endswith("_stub") and base != op and re.fullmatch(r"[a-z][a-z0-9_]*", base):
        return base
    return op


def _existing_kernel(hosts: dict[str, HostFile], stub: str) -> str | None:
    for host in hosts.values():
        kernels = host.kernels_of_stub(stub)
        if kernels:
            return kernels[0]
    return None
