"""`porter test --shapes`: the layouts Metal kernels break on, beyond upstream's samples.

Upstream's OpInfo samples of an elementwise op are mostly contiguous tensors of a few small
shapes; a kernel whose strided entry point reads the wrong stride, or whose dense one stops
short of the last threadgroup, passes them. These samples keep the op's own scalars and dtypes
(from its first upstream sample) and change only the tensors' layout:

- transposed: the input a transposed view (strides swapped), other operands contiguous;
- sliced with step: every operand `base[1:, ::3]` (a storage offset and a stride of 3);
- broadcast: operands of shapes (5, 1) and (1, 7) (a unary op: a (1, 7) row expanded, stride 0);
- 0-dim, empty ((0, 7)), and large (257 x 513 elements: many threadgroups, none full).

Their values are random in [-9, 9], with exact integers and zeros where ops branch. A backward
op's operands are not free values (sigmoid_backward's `result` is a sigmoid's output, in (0, 1);
at -7 a float16 rounding of its formula is magnified 50 times), so its layouts take their
values from its own first sample, drawn element by element with the same positions in every
operand of one shape, which keeps a (grad, result) pair of one element together.

The samples keep their layout to the kernel (the harness copies other samples, which makes
sliced and expanded ones contiguous), so on `--device emulate` every non-contiguous one runs
the strided entry point with the view's own strides, as the host's TensorIterator sends it.
"""

from __future__ import annotations

SHAPES = ("transposed", "sliced with step", "broadcast", "0-dim", "empty", "large")
LARGE = (257, 513)


def shape_samples(first, dtype, values_from_sample: bool = False) -> list:
    """The shape samples of an op, built on `first`, its first upstream sample of `dtype`
    (None: the op has none, so none are built); `values_from_sample`: each operand's values
    drawn from its own tensor in `first` (a backward op's, whose operands are bound)."""
    import torch

    if first is None or not isinstance(first.input, torch.Tensor):
        return []
    args = list(first.args)
    tensors = [first.input]
    while args and isinstance(args[0], torch.Tensor):
        tensors.append(args.pop(0))
    generator = torch.Generator().manual_seed(0)

    def make(shape, like):
        if values_from_sample and like.numel():
            return _drawn(shape, like)
        values = _values(shape, like.dtype, generator)
        if like is not tensors[0] and not (like.dtype.is_floating_point or like.dtype.is_complex):
            # never an integer or bool 0 in a second operand, as porter.harness.edges: an
            # integer division by zero traps on the host CPU (the emulator's kernel dies of
            # SIGFPE), where a Mac's GPU answers a value; its layouts are the question here
            values = torch.where(values == 0, torch.ones_like(values), values)
        return values

    def sample(name: str, operands: list):
        made = layout_sample_class()(operands[0], args=(*operands[1:], *args), kwargs=dict(first.kwargs))
        made.name = name
        return made

    def transposed(like):
        if values_from_sample:
            # drawn as a (5, 7) operand is, stored transposed: its elements pair with theirs
            return make((5, 7), like).t().contiguous().t()
        return make((7, 5), like).t()

    def sliced(like):
        return make((6, 21), like)[1:, ::3]

    if len(tensors) == 1:
        broadcast = [make((1, 7), tensors[0]).expand(5, 7)]
    else:
        broadcast = [make((5, 1), tensors[0]), *(make((1, 7), t) for t in tensors[1:])]
    built = {
        "transposed": [transposed(tensors[0]), *(make((5, 7), t) for t in tensors[1:])],
        "sliced with step": [sliced(t) for t in tensors],
        "broadcast": broadcast,
        "0-dim": [make((), t) for t in tensors],
        "empty": [make((0, 7), t) for t in tensors],
        "large": [make(LARGE, t) for t in tensors],
    }
    return [sample(name, built[name]) for name in SHAPES]


def _drawn(shape, like):
    """A tensor of `shape` whose elements are `like`'s, drawn at positions that depend on the
    shape alone: operands of one shape and of one size in the sample keep their elements paired."""
    import torch
    positions = torch.Generator().manual_seed(1 + sum(shape) * 31 + len(shape))
    index = torch.randint(0, like.numel(), shape, generator=positions)
    return like.detach().reshape(-1)[index].clone()


def _values(shape, dtype, generator):
    """Values in [-9, 9] (uint8 [0, 9], bool either), reproducible, in `dtype`."""
    import torch
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    low = 0 if dtype == torch.uint8 else -9
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.rand(shape, generator=generator, dtype=torch.float64) * 18 - 9
        # a few exact integers and zeros, where ops like heaviside and threshold branch
        wide = torch.where(torch.rand(shape, generator=generator) < 0.2, wide.round(), wide)
        return wide.to(dtype)
    return torch.randint(low, 10, shape, generator=generator).to(dtype)


def to_device(sample, device: str):
    """`sample` with every tensor on `device` in its own layout: the whole storage moves and the
    view is taken again there (Tensor.to makes a sliced or expanded view contiguous)."""
    import torch

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        storage = t.untyped_storage()
        flat = t.new_empty(0).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
        return flat.to(device).as_strided(t.shape, t.stride(), t.storage_offset())
    return sample.transform(move)


_LAYOUT_SAMPLE = []


def layout_sample_class():
    """SampleInput whose tensors reach the device as they are (views keep their strides); made
    on first use, since torch is imported lazily."""
    if not _LAYOUT_SAMPLE:
        from torch.testing._internal.opinfo.core import SampleInput

        class LayoutSample(SampleInput):
            keeps_layout = True

        _LAYOUT_SAMPLE.append(LayoutSample)
    return _LAYOUT_SAMPLE[0]
