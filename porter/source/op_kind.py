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
  `BINARY`). Scalar and `str` arguments are listed on the kind (`scalars`, `strings`) so that
  a port that learns to pass them can widen `PORTABLE` without reclassifying anything.

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
PORTABLE = frozenset({UNARY, BINARY})     # the shapes porter writes kernels for today

SCALAR_TYPES = frozenset({"Scalar", "float", "int", "bool", "SymInt"})   # `?` stripped
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


def classify(entry: native_yaml.Entry, *, include_pointwise: bool = False) -> OpKind:
    """The kind of one `.out` (or `.grad_input`) entry. `include_pointwise`: count ops tagged
    `pointwise` as elementwise too (candidates' wider net); the reason never depends on it."""
    structured = entry.fields.get("structured_inherits") == "TensorIteratorBase"
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
    if args.others or len(tensors) not in (1, 2):
        written = ", ".join(args.positional + args.keyword)
        return OpKind(shape, elementwise, f"takes ({written}): porter ports unary and binary "
                      "tensor ops with no other arguments", HAND_PORT, **facts)
    if len(args.outputs) != 1:
        names = ", ".join(native_yaml.argument_name(a) for a in args.outputs)
        return OpKind(shape, elementwise, f"writes {len(args.outputs)} outputs ({names}): porter "
                      "ports ops with one output", HAND_PORT, **facts)
    return OpKind(shape, elementwise, "", **facts)


def is_backward(entry: native_yaml.Entry) -> bool:
    """A backward op's out= overload (`sigmoid_backward.grad_input`, `.grad_output`): ported as
    any other out= overload, tested through its forward op (porter.harness.backward)."""
    return entry.overload in native_yaml.BACKWARD_OUT_OVERLOADS or any(
        native_yaml.argument_name(a) in native_yaml.BACKWARD_OUT_OVERLOADS
        for a in native_yaml.arguments(entry.schema).outputs)


def writes_out(entry: native_yaml.Entry) -> bool:
    """An out= overload: `.out` and its kin, or a backward op's `.grad_input`."""
    return entry.is_out or is_backward(entry)


def classify_family(entries, *, include_pointwise: bool = False) -> tuple[OpKind, native_yaml.Entry | None]:
    """The kind of an op from its family of entries (functional, in-place, overloads), and the
    out= entry it was read from: the first with CPU/CUDA rows, which a port shares (None when
    there is none)."""
    out = next((e for e in entries if writes_out(e) and e.dense_rows()), None)
    if out is not None:
        return classify(out, include_pointwise=include_pointwise), out
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
    if strings or len(scalars) != len(args.others):
        return OTHER
    if not args.others:
        return UNARY if len(args.tensors) == 1 else BINARY
    if [native_yaml.argument_name(a) for a in args.others] == ["alpha"]:
        return ALPHA
    return SCALAR
