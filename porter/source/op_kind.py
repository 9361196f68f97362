"""What kind of op an entry of `native_functions.yaml` is, and why porter cannot port it if not.

One home for the question, asked by every command: `resolve` (new-op, migrate-from-mpsgraph,
status) and `candidates` read the same `OpKind`, so they give the same reason for the same op.
`classify(entry)` is torchgen's `FunctionSchema.kind()` for porter's yaml model; it lives here, not
on the model, so that the model (`native_yaml`) knows nothing of what is done with it.

The facts, read from the yaml alone, in the order they are checked:
- the family has an out= entry with CPU/CUDA rows (`.out` and its kin, or a backward op's
  `.grad_input`; else: composite, or ufunc-generated kernels);
- that entry is a *structured TensorIterator op* (`structured_inherits: TensorIteratorBase`):
  its CPU and CUDA rows share one structured kernel that calls a DispatchStub, which is what a
  native MPS port joins (or a plain function CPU and CUDA share that runs a stub, which the
  caller finds in the checkout: `runs_stub`). `tags: pointwise` alone says the op is elementwise, not that such a
  kernel exists (`conj_physical`, `logit`: non-structured functions), so it is only the wider
  net that `candidates` casts (`include_pointwise=True`): those ops are listed, with the reason.
  A `# TensorIterator` comment is not a fact (it sits on reductions like `min.unary_out` too);
- its arguments have a shape porter ports (`PORTABLE`: one or two positional tensors, one
  output, nothing else).
To port a new kind of op, widen `PORTABLE` (the scalar arguments are listed on the kind:
`scalars`, `strings`) or drop a reason; every surface follows.

Reasons are phrases with the op name left out ("takes (...): porter ports ..."), so that each
surface can say `'op' <reason>`; `OpKind.refusal(op)` writes that sentence.
"""

from __future__ import annotations

from typing import NamedTuple

from porter.source import native_yaml

# Shapes of the arguments.
UNARY, BINARY = "unary", "binary"         # one / two tensors, nothing else
ALPHA = "alpha"                           # add's and sub's `Scalar alpha`, and no other argument
SCALAR = "scalar"                         # one or two tensors and scalar arguments
TERNARY = "ternary"                       # three tensors and one Scalar (addcmul's value)
OTHER = "other"                           # anything else: str, dims, lists, options, generators
PORTABLE = frozenset({UNARY, BINARY, ALPHA, SCALAR, TERNARY})   # the shapes porter writes kernels for

SCALAR_TYPES = frozenset({"Scalar", "float", "int", "bool", "SymInt"})   # `?` stripped
# The scalars porter hands a kernel (as its alpha or in a params struct; porter.port.scalars)
KERNEL_SCALAR_TYPES = frozenset({"Scalar", "float"})
STRING_TYPES = frozenset({"str"})

# The reasons, each a predicate of the op ("'logit' <reason>"). Kept word for word across
# releases where users grep for them.
NOT_ELEMENTWISE = ("is not an elementwise TensorIterator op: porter ports ops whose CPU/CUDA "
                   "kernel is a structured TensorIterator DispatchStub")
NOT_STRUCTURED = ("is not a structured TensorIterator op, so there is no shared CPU/CUDA kernel "
                  "for MPS to join")
COMPOSITE = ("has no CPU/CUDA kernel: it is composite (or an alias) and runs through the ops it "
             "decomposes into")
NO_OUT = "has no out= overload with CPU/CUDA kernels for MPS to share"
UFUNC = ("has CPU and CUDA kernels generated from its `ufunc_inner_loop`, with no DispatchStub "
         "for MPS to join")
# Ops wearing scalar arguments that are not one functor of their elements
REDUCTION = ("reduces its result (`{arg}`): its kernel is an elementwise part plus a reduction on "
             "the host, not one functor")
SPLITS = "works along a dimension of its input (`{arg}`), not one functor of its elements"
OVERLOADS = ("has {n} out= overloads with their own CPU/CUDA kernels ({kernels}), chosen by the "
             "arguments' dtypes and kinds; what is missing: an MPS implementation of each overload "
             "that builds the TensorIterator its CPU kernel builds and calls a Metal kernel, which "
             "porter does not write (it ports one shared kernel an op)")


class OpKind(NamedTuple):
    shape: str                      # UNARY | BINARY | ALPHA | SCALAR | OTHER
    elementwise: bool               # inside the net asked for (structured TI, or also pointwise)
    reason: str                     # why porter cannot port it; "" when it can
    hint: str = ""                  # what to do instead
    tensors: tuple[str, ...] = ()   # positional tensor arguments, as written
    scalars: tuple[str, ...] = ()   # Scalar/float/int/bool/SymInt arguments (optional or not)
    strings: tuple[str, ...] = ()   # str arguments (gelu's `approximate`)
    outputs: tuple[str, ...] = ()

    @property
    def portable(self) -> bool:
        return not self.reason

    def refusal(self, op: str) -> str:
        return f"'{op}' {self.reason}"


HAND_PORT = "write this op's MPS kernel by hand"


def classify(entry: native_yaml.Entry, *, include_pointwise: bool = False,
             runs_stub: bool = False) -> OpKind:
    """The kind of one `.out` (or `.grad_input`) entry. `include_pointwise`: count ops tagged
    `pointwise` as elementwise too (candidates' wider net); the reason never depends on it.
    `runs_stub`: the caller read the checkout and found that the plain function CPU and CUDA
    share runs a DispatchStub on a TensorIterator (logit_out), which a port joins as it would a
    structured kernel; the yaml alone cannot say so."""
    structured = entry.fields.get("structured_inherits") == "TensorIteratorBase" or runs_stub
    pointwise = "pointwise" in entry.fields.get("tags", "")
    if not (structured or pointwise):
        # not elementwise in any net (reductions, linear algebra, ...): no argument shape, and
        # candidates asks this of ~350 entries, so their schemas are not parsed
        return OpKind(OTHER, False, NOT_ELEMENTWISE, HAND_PORT)
    args = native_yaml.arguments(entry.schema)
    tensors, others = args.tensors, args.others          # each a pass over the arguments
    types = [_type(a) for a in others]
    scalars = tuple(a for a, t in zip(others, types) if t in SCALAR_TYPES)
    strings = tuple(a for a, t in zip(others, types) if t in STRING_TYPES)
    # a functional backward op returns its one output instead of writing an out= argument
    outputs = args.outputs or (("Tensor",) if functional_backward([entry]) is entry else ())
    shape = _shape(len(tensors), others, outputs, scalars, strings)
    if shape == OTHER and is_backward(entry) and ignored_bools(others):
        # leaky_relu_backward's `bool self_is_result`: checked by the meta function, never
        # handed to the stub's kernel (resolve checks the stub takes none)
        shape = _shape(len(tensors), [a for a in others if _type(a) != "bool"], outputs,
                       [a for a in scalars if _type(a) != "bool"], strings)
    facts = dict(tensors=tensors, scalars=scalars, strings=strings, outputs=args.outputs)
    elementwise = structured or (include_pointwise and pointwise)
    if not structured:
        return OpKind(shape, elementwise, NOT_STRUCTURED, HAND_PORT, **facts)
    refused = _not_one_functor(entry, args, tensors, scalars, strings)
    if refused:
        return OpKind(shape, elementwise, refused, HAND_PORT, **facts)
    if shape in PORTABLE:
        return OpKind(shape, elementwise, "", **facts)
    if not others and len(tensors) in (1, 2):        # the outputs are what is wrong
        names = ", ".join(native_yaml.argument_name(a) for a in args.outputs)
        return OpKind(shape, elementwise, f"writes {len(args.outputs)} outputs ({names}): porter "
                      "ports ops with one output", HAND_PORT, **facts)
    written = ", ".join(args.positional + args.keyword)
    other = next((a for a in others if _type(a) not in KERNEL_SCALAR_TYPES), None)
    why = f", not {other}" if other and len(tensors) in (1, 2) else ""
    return OpKind(shape, elementwise, f"takes ({written}): porter ports unary and binary "
                  f"tensor ops whose other arguments are Scalar or float{why}", HAND_PORT, **facts)


def _not_one_functor(entry, args, tensors, scalars, strings) -> str:
    """Why an op wearing scalar or str arguments is not one functor of its elements, or ""."""
    names = {native_yaml.argument_name(a): a for a in args.others}
    if "reduction" in names:
        return REDUCTION.format(arg=names["reduction"])
    if "dim" in names and _type(names["dim"]) == "int":
        return SPLITS.format(arg=names["dim"])
    if strings and len(tensors) in (1, 2):
        kernels = sorted({d.kernel for d in entry.dense_rows()})
        split = (f"; its CPU and CUDA kernels differ ({', '.join(kernels)}), so there is no shared "
                 "function for an MPS row to join and it can only be ported in place (its MPS "
                 "function's body replaced by a Metal call)") if len(kernels) > 1 else ""
        return (f"takes a str argument ({', '.join(native_yaml.argument_name(a) for a in strings)}) "
                f"that picks its kernel: porter passes Scalar and float arguments to a kernel, not "
                f"strings{split}")
    return ""


def is_backward(entry: native_yaml.Entry) -> bool:
    """A backward op's out= overload (`sigmoid_backward.grad_input`, `.grad_output`): ported as
    any other out= overload, tested through its forward op (porter.harness.backward)."""
    if entry.overload in native_yaml.BACKWARD_OUT_OVERLOADS:
        return True
    # the words first: candidates asks this of all ~3,000 entries, and a schema parse costs
    return any(w in entry.lines[0] for w in native_yaml.BACKWARD_OUT_OVERLOADS) and any(
        native_yaml.argument_name(a) in native_yaml.BACKWARD_OUT_OVERLOADS
        for a in native_yaml.arguments(entry.schema).outputs)


def writes_out(entry: native_yaml.Entry) -> bool:
    """An out= overload: `.out` and its kin, or a backward op's `.grad_input`."""
    return entry.is_out or is_backward(entry)


def shared_out_entry(entries) -> native_yaml.Entry | None:
    """The out= entry whose CPU/CUDA kernel a port shares: the first with CPU/CUDA rows."""
    return next((e for e in entries if writes_out(e) and e.dense_rows()), None)


def classify_family(entries, *, include_pointwise: bool = False,
                    runs_stub=None) -> tuple[OpKind, native_yaml.Entry | None]:
    """The kind of an op from its family of entries (functional, in-place, overloads), and the
    out= entry it was read from: the first with CPU/CUDA rows, which a port shares (None when
    there is none). `runs_stub(entry)`: asked only for a non-structured out= entry, whether the
    function CPU and CUDA share runs a DispatchStub on a TensorIterator (the checkout's sources
    say; porter.source.cpu_kernel.shared_function_stubs)."""
    out = shared_out_entry(entries)
    if out is None and runs_stub is not None:
        # a backward op with no out= overload (mish_backward): its one function, which CPU and
        # CUDA share, builds the iterator and runs the stub; MPS can share it as they do
        functional = functional_backward(entries)
        if functional is not None and runs_stub(functional):
            return classify(functional, include_pointwise=include_pointwise, runs_stub=True), functional
    if out is not None:
        kind = classify(out, include_pointwise=include_pointwise)
        if kind.reason in (NOT_STRUCTURED, NOT_ELEMENTWISE) and runs_stub is not None and runs_stub(out):
            kind = classify(out, include_pointwise=include_pointwise, runs_stub=True)
        if kind.portable:
            # pow: Tensor_Tensor, Tensor_Scalar, Scalar, each with its own kernel and stub
            kernels = list(dict.fromkeys(r.kernel for e in entries if writes_out(e) and not is_backward(e)
                                         for r in e.dense_rows()))
            if len(kernels) > 2:
                return kind._replace(reason=OVERLOADS.format(n=len(kernels), kernels=", ".join(kernels)),
                                     hint=HAND_PORT), out
        return kind, out
    if any(writes_out(e) and "ufunc_inner_loop" in e.fields for e in entries):
        return OpKind(OTHER, False, UFUNC, HAND_PORT), None
    pointwise = any("pointwise" in e.fields.get("tags", "") for e in entries)
    if pointwise and not any(e.dense_rows() for e in entries):
        return OpKind(OTHER, False, COMPOSITE, "port those ops instead"), None
    return OpKind(OTHER, False, NOT_ELEMENTWISE if not pointwise else NO_OUT, HAND_PORT), None


def ignored_bools(others) -> list[str]:
    """The plain `bool` arguments of a backward op whose other non-tensor arguments a kernel
    takes (Scalar, float): upstream's kernels never receive such a flag, its meta function
    checks it. Empty when anything else is there."""
    bools = [a for a in others if native_yaml.argument_type(a) == "bool"]
    rest = [a for a in others if native_yaml.argument_type(a) != "bool"]
    if bools and all(_type(a) in KERNEL_SCALAR_TYPES for a in rest):
        return [native_yaml.argument_name(a) for a in bools]
    return []


def functional_backward(entries) -> native_yaml.Entry | None:
    """A backward op's only kernel: its functional entry, which returns one Tensor and has
    CPU/CUDA rows (`mish_backward(Tensor grad_output, Tensor self) -> Tensor`), or None."""
    for e in entries:
        if e.is_backward and not writes_out(e) and e.dense_rows() and \
                e.schema.rsplit("->", 1)[-1].strip() == "Tensor":
            return e
    return None


def _type(arg: str) -> str:
    return native_yaml.argument_type(arg).rstrip("?")


def _shape(n_tensors: int, others, outputs, scalars, strings) -> str:
    # str arguments (gelu's approximate) are listed on the kind but not yet a shape of their own
    if len(outputs) == 1 and n_tensors == 3 and len(others) == 1 and \
            _type(others[0]) == "Scalar" and not strings:
        return TERNARY       # self + value * (t1 op t2): a ternary kernel with the Scalar as alpha
    if len(outputs) != 1 or n_tensors not in (1, 2):
        return OTHER
    if strings or len(scalars) != len(others) or any(_type(a) not in KERNEL_SCALAR_TYPES for a in others):
        return OTHER
    if not others:
        return UNARY if n_tensors == 1 else BINARY
    if [native_yaml.argument_name(a) for a in others] == ["alpha"]:
        return ALPHA
    return SCALAR
