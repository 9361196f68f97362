"""Which kernel runs a sample, with what output type: the host's choice, made once for every
device that runs a checkout's Metal kernels (`--device emulate`, `--device mps-shader`) and for
the reference cache, which records the dtypes it depends on.

The steps, as the host .mm and TensorIterator take them:
1. the host kernel: among those a *Kernel.mm dispatches for the op's names (`kernel_names`,
   `select_host`), with the op's own selectors (round's decimals, div's rounding_mode);
2. the dtype the operands are promoted to (`torch.result_type` over as many operands as the
   kernel kind takes, `ARITY`) and the output dtype the op's meta function gives;
3. the registration of the .metal file whose input type is the promoted dtype and whose output
   type is that output dtype (`choose`): none is MPS's own "Failed to create function state
   object" error, which the device reports.

A sample is seen through its types: `TorchSample` asks torch (an op_db sample); a
`RecordedSample` reads what the recorder asked torch when it cached the sample (no torch).
Registrations are spelled in Metal types (`REGISTER_UNARY_OP(exp, float, float)`), samples in
torch's dtype names (`"float32"`): the table between them is here, and the moves of a
SampleInput between devices (`to_device`: the meta function that tells the output dtype, the
harness's device copies). torch is imported lazily: the warm path runs without it.
"""

from __future__ import annotations

from typing import NamedTuple

# tensor operands of each kind of registration (REGISTER_<KIND>_OP)
ARITY = {"unary": 1, "unary_alpha": 1, "binary": 2, "binary_alpha": 2, "ternary": 3,
         "ternary_alpha": 3}
# complex kernels whose result the host reads as real (abs of complex is a real tensor)
REAL_PART_KERNELS = {"abs"}
# div's rounding_mode kwarg selects the kernel (div_true_stub, div_floor_stub, ...)
DIV_KERNELS = {None: "div_true", "floor": "div_floor", "trunc": "div_trunc"}


# ----------------------------------------------------------------- Metal types and dtype names

# Metal type -> torch dtype name
METAL_TO_NAME = {
    "float": "float32", "half": "float16", "bfloat": "bfloat16", "long": "int64", "int": "int32",
    "short": "int16", "char": "int8", "uchar": "uint8", "bool": "bool", "float2": "complex64",
    "half2": "complex32",
}
NAME_TO_METAL = {v: k for k, v in METAL_TO_NAME.items()}
METAL_DTYPES = tuple(METAL_TO_NAME)


def dtype_name(dtype) -> str:
    """torch's name of a torch dtype: torch.float32 -> "float32"."""
    return str(dtype).removeprefix("torch.")


def torch_dtype(metal: str):
    """The torch dtype of a Metal type, or None."""
    import torch
    name = METAL_TO_NAME.get(metal)
    return None if name is None else getattr(torch, name)


def metal_dtype(dtype) -> str | None:
    """The Metal type of a torch dtype, or None."""
    return NAME_TO_METAL.get(dtype_name(dtype))


def is_floating_or_complex(name: str) -> bool:
    """`dtype.is_floating_point or dtype.is_complex`, on a dtype name."""
    return name.startswith(("float", "bfloat", "complex"))


# ----------------------------------------------------------------- a SampleInput between devices

def to_device(sample, device: str):
    """A copy of `sample` with every tensor on `device` (CPU copies are real copies), each
    a leaf that requires grad where the original did."""
    import torch

    def move(x):
        if isinstance(x, torch.Tensor):
            y = x.detach().to(device)
            y = y.clone() if device != "meta" and y.data_ptr() == x.data_ptr() and x.numel() else y
            # a sample that requires grad keeps requiring it (upstream's
            # transform_opinfo_sample_to_cpu): some ops refuse such inputs (resize_)
            return y.requires_grad_(x.requires_grad) if x.requires_grad else y
        return x
    return sample.transform(move)


def to_cpu(value):
    import torch
    from torch.utils import _pytree as pytree
    return pytree.tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, value)


# ----------------------------------------------------------------- the op's names

class OpNames:
    """What finds an OpInfo's kernel: the OpInfo itself on the op_db path, a record of the
    reference cache on the cached one."""

    __slots__ = ("name", "aten_name", "variant")

    def __init__(self, name: str, aten_name: str | None = None, variant: str = ""):
        self.name, self.aten_name, self.variant = name, aten_name, variant or ""

    @classmethod
    def of(cls, opinfo) -> "OpNames":
        return cls(opinfo.name, getattr(opinfo, "aten_name", None),
                   getattr(opinfo, "variant_test_name", "") or "")


# ----------------------------------------------------------------- 1. the host kernel

def kernel_names(op: OpNames) -> set[str]:
    """The names a *Kernel.mm may dispatch the op's kernel under: the stub is named after the
    aten op (mish_stub), the OpInfo may not be (nn.functional.mish)."""
    return {op.name, op.aten_name or op.name, op.name.removeprefix("nn.functional.")}


def candidates(hosts: list, op: OpNames) -> list:
    """The host kernels (dispatched under `kernel_names(op)`) that can run the op's variant."""
    if op.name == "round":
        # round.decimals_N runs round_decimals_stub; plain round runs round_stub
        wants_decimals = "decimals" in op.variant
        hosts = [h for h in hosts if (h.stub == "round_decimals") == wants_decimals]
    return hosts


def select_host(hosts: list, op: OpNames, kwargs: dict):
    """The host kernel a sample with `kwargs` runs, among `candidates`."""
    if not hosts:
        raise RuntimeError(f"emulate: no Metal kernel is dispatched for {op.name} "
                           f"in the checkout's *Kernel.mm")
    if op.name == "div":
        want = DIV_KERNELS.get(kwargs.get("rounding_mode"))
        hosts = [h for h in hosts if h.kernel == want] or hosts
    return hosts[0]


# ----------------------------------------------------------------- 2. the sample's types

def promoted(operands: list, arity: int):
    """The torch dtype TensorIterator computes `arity` operands in."""
    import torch
    if arity == 1:
        return operands[0].dtype
    if arity == 2:
        return torch.result_type(*operands[:2])
    t = torch.result_type(operands[0], operands[1])
    return torch.promote_types(t, torch.result_type(operands[2], operands[0]))


def promotions(sample) -> dict[str, str | None]:
    """`promoted` for 1, 2 and 3 operands of a sample, by name (None: not that many operands,
    or torch refused): what the reference cache records, so that its run needs no torch."""
    operands = [sample.input, *sample.args]
    out: dict[str, str | None] = {}
    for arity in (1, 2, 3):
        try:
            dtype = promoted(operands, arity) if len(operands) >= arity else None
        except Exception:
            dtype = None
        out[str(arity)] = dtype_name(dtype) if dtype is not None else None
    return out


def output_dtype(opinfo, sample):
    """The dtype the op's meta function gives the output (bool for logical ops, float for
    int->float math): the host looks the kernel up by it. None when it cannot be told."""
    import torch
    key = _meta_key(opinfo, sample)
    if key is not None and key in _META_DTYPES:
        return _META_DTYPES[key]
    for device in ("meta", "cpu"):
        try:
            moved = to_device(sample, device)
            out = opinfo(moved.input, *moved.args, **moved.kwargs)
        except Exception:
            continue
        dtype = out.dtype if isinstance(out, torch.Tensor) else None
        if device == "meta" and key is not None:
            if len(_META_DTYPES) >= _META_DTYPES_LIMIT:     # a long --watch: the oldest go
                del _META_DTYPES[next(iter(_META_DTYPES))]
            _META_DTYPES[key] = dtype
        return dtype
    return None


# The meta function's answer by what it sees, which is never a tensor's values: each sample of a
# run asks once per source, and most share their dtypes and shapes (about 1 ms a call). A CPU
# answer (the meta function failed) is not kept: it may depend on the values.
_META_DTYPES: dict = {}
# a run's samples have a few hundred signatures; a small entry each
_META_DTYPES_LIMIT = 20000


def _meta_key(opinfo, sample):
    """(the op, each operand's dtype and shape, each other argument as it is), or None where
    an argument is not one the key can spell exactly."""
    import torch

    def spell(x):
        if isinstance(x, torch.Tensor):
            return ("tensor", x.dtype, tuple(x.shape), x.requires_grad)
        if x is None or isinstance(x, (bool, int, float, complex, str, torch.dtype)):
            return (type(x).__name__, x)
        if isinstance(x, (list, tuple)):
            items = tuple(spell(v) for v in x)
            return None if None in items else (type(x).__name__, items)
        return None

    parts = [spell(sample.input), spell(tuple(sample.args)),
             spell(tuple(sorted(sample.kwargs.items())))]
    if None in parts:
        return None
    return (id(opinfo), opinfo.name, getattr(opinfo, "variant_test_name", ""), *parts)


class TorchSample:
    """The types of an op_db SampleInput, asked of torch."""

    def __init__(self, opinfo, sample):
        self.opinfo, self.sample = opinfo, sample

    def operands_ok(self, operands: list) -> bool:
        import torch
        return all(isinstance(x, (torch.Tensor, int, float, bool, complex)) for x in operands)

    def promoted(self, operands: list, arity: int) -> str:
        return dtype_name(promoted(operands, arity))

    def out_dtype(self) -> str | None:
        dtype = output_dtype(self.opinfo, self.sample)
        return None if dtype is None else dtype_name(dtype)


class RecordedSample:
    """The types of a sample of the reference cache, as the recorder asked torch for them
    (porter.harness.cached_run.Sample: `promoted`, `out_dtype`)."""

    def __init__(self, sample):
        self.sample = sample

    def operands_ok(self, operands: list) -> bool:
        from porter.dispatch.numpy_tensors import PArray
        return all(isinstance(x, (PArray, int, float, bool, complex)) for x in operands)

    def promoted(self, operands: list, arity: int) -> str:
        from porter.dispatch.numpy_tensors import Unsupported
        common = self.sample.promoted.get(str(arity))
        if common is None or common not in NAME_TO_METAL:
            raise Unsupported(f"no recorded promotion to a Metal type for {arity} operands")
        return common

    def out_dtype(self) -> str | None:
        return self.sample.out_dtype


# ----------------------------------------------------------------- 3. the registration

class Choice(NamedTuple):
    arity: int
    operands: list          # the tensor operands: the input and the leading args
    common: str             # the dtype they are promoted to (torch's name)
    want_out: str | None    # the meta output dtype (None: it could not be told)
    matching: list          # the registrations whose input type is `common`
    reg: object | None      # the one that runs; None: MPS has no kernel for the sample
    # how many of the sample's leading tensors the operands come from (the scalars follow):
    # `arity`, but 1 for threshold, whose iterator reads self twice
    sample_tensors: int = 0


def out_matches(out_type: str, want_out: str | None, kernel: str) -> bool:
    """Whether a registration with Metal output type `out_type` gives `want_out`."""
    out = METAL_TO_NAME.get(out_type)
    if want_out is None or out == want_out:
        return True
    # complex abs: a float2 kernel whose real lane the host reads as the real result
    return (kernel in REAL_PART_KERNELS and out is not None and out.startswith("complex")
            and not want_out.startswith("complex"))


def operands_can_swap(kind: str) -> bool:
    """Whether a kernel of `kind` takes more than one tensor operand, so that the order the
    op's meta function's iterator reads them in (`choose`'s `order`) can matter: a device
    reads that order from the checkout only then."""
    return ARITY[kind] > 1


def choose(kernel: str, regs: list, kind: str, sample, types, device: str, op_name: str,
           order: tuple[int, ...] | None = None) -> Choice:
    """The registration of `kernel` (its registrations `regs`, of kind `kind`) that runs
    `sample` on `device`. A registration the emulator could not build (`built` false) runs
    nothing; a static one (mps-shader's: the Metal compiler builds the file whole) can.
    `order`: the sample's tensors the op's iterator reads, in its order, where the meta function
    says (threshold_backward(grad, self) reads self first: (1, 0)); else the schema's order."""
    arity = ARITY[kind]
    operands = [sample.input, *list(sample.args)[: arity - 1]]
    sample_tensors = arity
    if order and len(order) == arity and max(order) < len(operands):
        operands = [operands[i] for i in order]
        sample_tensors = max(order) + 1
    if not types.operands_ok(operands):
        raise RuntimeError(f"{device}: unsupported operands for {op_name}")
    common = types.promoted(operands, arity)
    want_out = types.out_dtype()
    matching = [r for r in regs if r.in_type == NAME_TO_METAL.get(common)]
    reg = next((r for r in matching
                if getattr(r, "built", True) and out_matches(r.out_type, want_out, kernel)), None)
    return Choice(arity, operands, common, want_out, matching, reg, sample_tensors)
