"""What kind of op an entry of `native_functions.yaml` is, and why porter cannot port it if not.

One home for the question, asked by every command: `resolve` (new-op, migrate-from-mpsgraph,
status) and `candidates` read the same `OpKind`, so they give the same reason for the same op.
The model classifies itself, as torchgen's `FunctionSchema.kind()` does: `Entry.kind()`.

Two facts decide, both read from the yaml entry alone:
- the op is a *structured TensorIterator op* (`structured_inherits: TensorIteratorBase`): its
  CPU and CUDA rows share one structured kernel that calls a DispatchStub, which is what a
  native MPS port joins. `tags: pointwise` alone says the op is elementwise, not that such a
  kernel exists (`conj_physical`, `logit`: non-structured functions), so it is only the wider
  net that `candidates` casts (`include_pointwise=True`): those ops are listed, with the reason.
- the arguments: one or two positional tensors, one output, and nothing else (`UNARY`,
  `BINARY`), or Scalar/float ones besides (`ALPHA`, `SCALAR`: porter.port.scalars passes them
  to the kernel). `str` and other arguments are listed on the kind (`strings`) but not ported.

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
OTHER = "other"                           # anything else: str, dims, lists, options, generators
PORTABLE = frozenset({UNARY, BINARY, ALPHA, SCALAR})     # the shapes porter writes kernels for

SCALAR_TYPES = frozenset({"Scalar", "float", "int", "bool", "SymInt"})   # `?` stripped
# The scalars porter hands a kernel (as its alpha or in a params struct): `?` stripped
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
BACKWARD = "is a backward op (it writes `grad_input`): porter ports forward ops"
REDUCTION = ("reduces its result (`{arg}`): its kernel is an elementwise part plus a reduction on "
             "the host, not one functor")
SPLITS = "works along a dimension of its input (`{arg}`), not one functor of its elements"
OVERLOADS = ("has {n} out= overloads with their own CPU/CUDA kernels ({kernels}): several kernels "
             "chosen by the arguments' dtypes and kinds, not one functor")


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
    args = native_yaml.arguments(entry.schema)
    tensors = args.tensors
    scalars = tuple(a for a in args.others if _type(a) in SCALAR_TYPES)
    strings = tuple(a for a in args.others if _type(a) in STRING_TYPES)
    shape = _shape(args, scalars, strings)
    facts = dict(tensors=tensors, scalars=scalars, strings=strings, outputs=args.outputs)
    elementwise = structured or (include_pointwise and pointwise)
    if not structured:
        reason = NOT_STRUCTURED if pointwise else NOT_ELEMENTWISE
        return OpKind(shape, elementwise, reason, HAND_PORT, **facts)
    if is_backward(entry):
        return OpKind(shape, elementwise, BACKWARD, HAND_PORT, **facts)
    names = {native_yaml.argument_name(a): a for a in args.others}
    if "reduction" in names:
        return OpKind(shape, elementwise, REDUCTION.format(arg=names["reduction"]), HAND_PORT, **facts)
    if "dim" in names and _type(names["dim"]) == "int":
        return OpKind(shape, elementwise, SPLITS.format(arg=names["dim"]), HAND_PORT, **facts)
    if strings and len(tensors) in (1, 2):
        names = ", ".join(native_yaml.argument_name(a) for a in strings)
        kernels = sorted({d.kernel for d in entry.dense_rows()})
        split = (f"; its CPU and CUDA kernels differ ({', '.join(kernels)}), so there is no shared "
                 "function for an MPS row to join and it can only be ported in place (its MPS "
                 "function's body replaced by a Metal call)") if len(kernels) > 1 else ""
        return OpKind(shape, elementwise, f"takes a str argument ({names}) that picks its kernel: "
                      f"porter passes Scalar and float arguments to a kernel, not strings{split}",
                      HAND_PORT, **facts)
    if len(tensors) == 3 and scalars and len(args.outputs) == 1:
        return OpKind(shape, elementwise, f"takes three tensors and a scalar ({', '.join(scalars)}): "
                      "porter writes unary and binary kernels, and a three-tensor kernel would need "
                      "a way to pass the scalar (a ternary alpha registration)", HAND_PORT, **facts)
    if shape not in PORTABLE and (args.others or len(tensors) not in (1, 2)):
        written = ", ".join(args.positional + args.keyword)
        other = next((a for a in args.others if _type(a) not in KERNEL_SCALAR_TYPES), None)
        why = f", not {other}" if other and len(tensors) in (1, 2) else ""
        return OpKind(shape, elementwise, f"takes ({written}): porter ports unary and binary "
                      f"tensor ops whose other arguments are Scalar or float{why}", HAND_PORT, **facts)
    if len(args.outputs) != 1:
        names = ", ".join(native_yaml.argument_name(a) for a in args.outputs)
        return OpKind(shape, elementwise, f"writes {len(args.outputs)} outputs ({names}): porter "
                      "ports ops with one output", HAND_PORT, **facts)
    return OpKind(shape, elementwise, "", **facts)


def is_backward(entry: native_yaml.Entry) -> bool:
    return entry.overload == "grad_input" or any(
        native_yaml.argument_name(a) == "grad_input" for a in native_yaml.arguments(entry.schema).outputs)


def writes_out(entry: native_yaml.Entry) -> bool:
    """An out= overload: `.out` and its kin, or a backward op's `.grad_input`."""
    return entry.is_out or is_backward(entry)


def classify_family(entries, *, include_pointwise: bool = False,
                    runs_stub=None) -> tuple[OpKind, native_yaml.Entry | None]:
    """The kind of an op from its family of entries (functional, in-place, overloads), and the
    out= entry it was read from: the first with CPU/CUDA rows, which a port shares (None when
    there is none). `runs_stub(entry)`: asked only for a non-structured out= entry, whether the
    function CPU and CUDA share runs a DispatchStub on a TensorIterator (the checkout's sources
    say; porter.source.cpu_kernel.shared_function_stubs)."""
    out = next((e for e in entries if writes_out(e) and e.dense_rows()), None)
    if out is not None:
        kernels = list(dict.fromkeys(r.kernel for e in entries if writes_out(e) and not is_backward(e)
                                     for r in e.dense_rows()))
        kind = classify(out, include_pointwise=include_pointwise)
        if kind.reason in (NOT_STRUCTURED, NOT_ELEMENTWISE) and runs_stub is not None and runs_stub(out):
            kind = classify(out, include_pointwise=include_pointwise, runs_stub=True)
        if len(kernels) > 2 and kind.portable:
            # pow: Tensor_Tensor, Tensor_Scalar, Scalar, each with its own kernel and stub
            return kind._replace(reason=OVERLOADS.format(n=len(kernels), kernels=", ".join(kernels)),
                                 hint=HAND_PORT), out
        return kind, out
    if any(writes_out(e) and "ufunc_inner_loop" in e.fields for e in entries):
        return OpKind(OTHER, False, UFUNC, HAND_PORT), None
    pointwise = any("pointwise" in e.fields.get("tags", "") for e in entries)
    if pointwise and not any(e.dense_rows() for e in entries):
        return OpKind(OTHER, False, COMPOSITE, "port those ops instead"), None
    return OpKind(OTHER, False, NOT_ELEMENTWISE if not pointwise else NO_OUT, HAND_PORT), None


def _type(arg: str) -> str:
    return native_yaml.argument_type(arg).rstrip("?")


def _shape(args: native_yaml.Arguments, scalars, strings) -> str:
    # str arguments (gelu's approximate) are listed on the kind but not yet a shape of their own
    if len(args.outputs) != 1 or len(args.tensors) not in (1, 2):
        return OTHER
    if strings or len(scalars) != len(args.others) or any(
            _type(a) not in KERNEL_SCALAR_TYPES for a in args.others):
        return OTHER
    if not args.others:
        return UNARY if len(args.tensors) == 1 else BINARY
    if [native_yaml.argument_name(a) for a in args.others] == ["alpha"]:
        return ALPHA
    return SCALAR
