"""`porter test` for backward ops, and `porter test OP --grad` for forward ops.

A backward op (`sigmoid_backward`) has no OpInfo: upstream checks it through the forward op
(`TestConsistency.test_output_grad_match`), whose autograd formula calls it. A device without
autograd of its own (the emulator) cannot run that test, so porter tests the backward op
directly, with inputs built on the CPU as the formula builds them
(porter.source.derivatives): for each sample of the forward OpInfo, `self` is the sample's
input, `result` the forward op's CPU output, `grad` a seeded random tensor of the output's
shape, and the formula's other arguments (`eps`, `beta`) the sample's own. The emulated
kernel's result is compared with the CPU backward op's, with the forward OpInfo's tolerances.

Both modes wrap the forward OpInfo in an object the runner treats as an OpInfo, so tables,
JSON, JUnit, `--sample` and exit codes are those of every other op.
"""

from __future__ import annotations

import ast

from porter.errors import PorterError
from porter.source.derivatives import Forward

# What a gradient is computed in. Upstream's test_output_grad_match sends MPS_GRAD_DTYPES
# (float32, float16); bfloat16 runs the same kernels, and float64 only off MPS.
GRAD_DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")
# upstream's MPS_GRAD_DTYPES (test/test_mps.py), for --grad on mps-like devices
MPS_GRAD_DTYPE_NAMES = ("float16", "float32")
GRAD_SEED = 0
# Built-in, approximate: upstream test_output_grad_match's gradient-only tolerances (OpInfo
# name, variant, dtype), used only where the checkout's own test has none (tolerances.py)
GRAD_TOLERANCES = {
    ("nn.functional.pad", "replicate", "float16"): (1e-5, 1.5e-3),
    ("nn.functional.pad", "reflect", "float16"): (1e-5, 1.5e-3),
    ("nn.functional.unfold", "", "float16"): (1e-3, 1e-3),
    ("_unsafe_masked_index", "", "float16"): (3e-3, 3e-3),
    ("logcumsumexp", "", "float16"): (4e-3, 1e-3),
    ("logcumsumexp", "", "float32"): (4e-3, 1e-3),
    ("nn.functional.max_pool3d", "", "float16"): (5e-3, 5e-3),
    ("nn.functional.embedding_bag", "", "float16"): (5e-3, 5e-3),
    ("index_reduce", "mean", "float16"): (0.02, 0.02),
    ("index_reduce", "prod", "float16"): (0.02, 0.02),
}


def _float_dtypes(dtypes, names) -> set:
    import torch
    allowed = {getattr(torch, n) for n in names}
    return {d for d in dtypes if d in allowed}


def _tolerance_decorators(info) -> tuple:
    """The forward OpInfo's tolerance overrides, without its expectations (which are the
    forward test's, not this one's)."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    kept = []
    for dec in info.decorators or ():
        inner = dec.decorators if hasattr(dec, "is_active") else [dec]
        if any(isinstance(d, (toleranceOverride, precisionOverride)) for d in inner):
            kept.append(dec)
    return tuple(kept)


class BackwardOpInfo:
    """The backward op `op`, seen through the forward OpInfo `info` and its formula `forward`."""

    test_conjugated_samples = False
    test_name = "backward_output_match"
    # its operands are bound by the formula (`result` is the forward op's output): the --shapes
    # layouts take their values from its samples, not from porter.harness.shapes' range
    operands_bound = True

    def __init__(self, op: str, forward: Forward, info):
        self.op = op
        self.forward = forward
        self.info = info
        self.name = op
        self.aten_name = op
        self.variant_test_name = ""
        self.full_name = self.formatted_name = op
        # tolerances are the forward op's (its low-precision list entries, its overrides)
        self.tolerance_name = info.name
        self.tolerance_variant = info.variant_test_name
        self.decorators = _tolerance_decorators(info)

    @property
    def via(self) -> str:
        return (f"{self.info.full_name or self.info.name} ({self.forward.path}:{self.forward.line}: "
                f"{self.op}({', '.join(self.forward.call_args)}))")

    @property
    def formula(self) -> list:
        return formula(self.forward)

    @property
    def sample_inputs_func(self):
        """The forward OpInfo's (the reference cache's record names its source)."""
        return self.info.sample_inputs_func

    def supported_dtypes(self, device_type: str):
        return _float_dtypes(self.info.supported_dtypes(device_type), GRAD_DTYPE_NAMES)

    def __call__(self, *args, **kwargs):
        import torch
        return getattr(torch.ops.aten, self.op)(*args, **kwargs)

    def sample_inputs(self, device, dtype, requires_grad=False, set_seed=True, **kwargs):
        return self._through_formula(
            self.info.sample_inputs(device, dtype, requires_grad=False, set_seed=set_seed))

    def reference_inputs(self, device, dtype, requires_grad=False, set_seed=True, **kwargs):
        """The forward OpInfo's reference inputs (extremal values), through the formula."""
        return self._through_formula(
            self.info.reference_inputs(device, dtype, requires_grad=False, set_seed=set_seed))

    def _through_formula(self, samples):
        import torch
        from torch.testing._internal.opinfo.core import SampleInput
        schema = getattr(torch.ops.aten, self.op).default._schema
        keyword = {k for k, a in enumerate(schema.arguments) if a.kwarg_only}
        for index, sample in enumerate(samples):
            if not isinstance(sample.input, torch.Tensor):
                continue
            args = self._arguments(sample, index)
            # the formula passes every argument by position; the op takes some by keyword only
            positional = [v for k, v in enumerate(args) if k not in keyword]
            kwargs = {schema.arguments[k].name: args[k] for k in sorted(keyword) if k < len(args)}
            yield SampleInput(positional[0], args=tuple(positional[1:]), kwargs=kwargs)

    # ------------------------------------------------------------------ inputs
    def _arguments(self, sample, index: int) -> list:
        values = {}
        for arg in self.forward.call_args:
            values[arg] = self._value(arg, sample, index, values)
        return [values[a] for a in self.forward.call_args]

    def _value(self, arg: str, sample, index: int, values: dict):
        import torch
        if arg == "self":
            return sample.input
        if arg == "result":
            return self._forward_output(sample)
        if arg == "grad":
            out = values.get("result")
            if out is None:
                out = self._forward_output(sample)
            generator = torch.Generator().manual_seed(GRAD_SEED + index)
            return torch.rand(out.shape, dtype=torch.float64, generator=generator).to(out.dtype)
        names = self.forward.forward_args
        if arg in names:
            position = names.index(arg)
            if 0 < position <= len(sample.args):
                return sample.args[position - 1]
            if arg in sample.kwargs:
                return sample.kwargs[arg]
            default = self.forward.default(arg)
            if default is not None:
                return _literal(default, arg, self)
            raise PorterError(f"{self.op}: the sample of {self.info.name} gives no value for "
                              f"'{arg}' and its schema no default")
        return _literal(arg, arg, self)

    def _forward_output(self, sample):
        import torch
        out = self.info(sample.input, *sample.args, **sample.kwargs)
        if not isinstance(out, torch.Tensor):
            raise PorterError(f"{self.op}: {self.info.name} returns {type(out).__name__}, "
                              "not one tensor: its 'result' cannot be built")
        return out.detach()


def _literal(text: str, arg: str, info: BackwardOpInfo):
    """A formula or schema default written as a literal (`0`, `'none'`, `None`, `true`)."""
    spelled = {"true": "True", "false": "False", "None": "None"}.get(text, text)
    try:
        value = ast.literal_eval(spelled)
    except (ValueError, SyntaxError):
        raise PorterError(f"{info.op}: cannot build its argument '{arg}' from {info.forward.path}:"
                          f"{info.forward.line} ({info.forward.op}'s formula passes {text!r})",
                          hint="porter builds grad, self, result, the forward op's arguments "
                               "and literals") from None
    return value


class GradOpInfo:
    """`porter test OP --grad`: the forward op's output and its gradients, as upstream's
    test_output_grad_match compares them (device against CPU, one random grad_output)."""

    test_name = "test_output_grad_match"

    def __init__(self, info, mps_like: bool):
        self.info = info
        self.mps_like = mps_like
        self.name = info.name
        self.aten_name = getattr(info, "aten_name", info.name)
        self.variant_test_name = info.variant_test_name
        self.full_name = info.full_name
        self.formatted_name = info.formatted_name
        self.decorators = info.decorators
        self.test_conjugated_samples = False
        self.tolerance_name = info.name
        self.tolerance_variant = info.variant_test_name

    def compare(self, tc, expected, actual, atol, rtol, dtype: str, gradients=None) -> None:
        """upstream's two checks: the output with the op's tolerances, then the gradients
        with `gradients`, the checkout's gradient tolerances (None: porter's built-in,
        approximate copy of upstream's gradient-only overrides)."""
        tc.assertEqual(expected[0], actual[0], atol=atol, rtol=rtol)
        if gradients is None:
            gradients = GRAD_TOLERANCES.get((self.name, self.variant_test_name, dtype),
                                            GRAD_TOLERANCES.get((self.name, "", dtype), (atol, rtol)))
        atol, rtol = gradients
        tc.assertEqual(expected[1], actual[1], atol=atol, rtol=rtol)

    def supported_dtypes(self, device_type: str):
        names = MPS_GRAD_DTYPE_NAMES if self.mps_like else GRAD_DTYPE_NAMES
        return _float_dtypes(self.info.supported_dtypes(device_type), names)

    def sample_inputs(self, device, dtype, requires_grad=False, set_seed=True, **kwargs):
        return self.info.sample_inputs(device, dtype, requires_grad=True, set_seed=set_seed)

    def reference_inputs(self, device, dtype, requires_grad=False, set_seed=True, **kwargs):
        return self.info.reference_inputs(device, dtype, requires_grad=True, set_seed=set_seed)

    def __call__(self, input, *args, **kwargs):
        """(forward output, gradients of every floating input), on the inputs' device."""
        import torch
        from torch.utils import _pytree as pytree

        def leaf(t):
            if isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex):
                return t.detach().requires_grad_(True)
            return t
        # samples reach here detached (copied to the device): the floating inputs are the ones
        # upstream's samples make require grad
        input, args, kwargs = pytree.tree_map(leaf, (input, list(args), dict(kwargs)))
        with torch.enable_grad():
            out = self.info(input, *args, **kwargs)
        outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        diff_out = tuple(t for t in outs if isinstance(t, torch.Tensor) and t.requires_grad)
        diff_arg = tuple(t for t in pytree.tree_leaves((input, args, kwargs))
                         if isinstance(t, torch.Tensor) and t.requires_grad)
        detached = pytree.tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)
        if not diff_out:
            return detached, ()
        generator = torch.Generator().manual_seed(GRAD_SEED)
        grads_out = tuple(torch.rand(t.shape, dtype=torch.float64, generator=generator)
                          .to(dtype=t.dtype).to(t.device) for t in diff_out)
        grads = torch.autograd.grad(diff_out, diff_arg, grad_outputs=grads_out, allow_unused=True)
        return detached, tuple(g.detach() if g is not None else None for g in grads)


def forward_infos(db, forward: Forward) -> list:
    """The forward op's OpInfos: by aten name, else as torch.nn.functional names most
    activations (`softplus` is the OpInfo `nn.functional.softplus`)."""
    from porter.harness import opdb
    for name in (forward.op, f"nn.functional.{forward.op}"):
        try:
            return opdb.find(db, name)
        except PorterError:
            continue
    return []


def formula(forward: Forward | None) -> list | None:
    """What a backward op's samples are built from besides the forward OpInfo: the forward
    schema and the formula's call, where they are read (the reference cache compares it)."""
    if forward is None:
        return None
    return [forward.schema, list(forward.call_args), forward.path, forward.line]


def current_formula(checkout, op: str) -> list | None:
    """formula() of `op` as the checkout's derivatives.yaml (or torchgen's) says it now."""
    from porter.source.derivatives import forward_of
    return formula(forward_of(checkout, op))


def backward_infos(checkout, db, op: str) -> list[BackwardOpInfo] | None:
    """The OpInfo-like objects that test backward op `op`, or None if `op` is not one."""
    if not op.endswith("_backward"):
        return None
    from porter.source.derivatives import forward_of
    forward = forward_of(checkout, op)
    if forward is None:
        return None
    infos = forward_infos(db, forward)
    if not infos:
        raise PorterError(f"{op}: its forward op {forward.op} ({forward.path}:{forward.line}) has "
                          "no OpInfo to take samples from", hint="test the forward op on a device")
    return [BackwardOpInfo(op, forward, info) for info in infos]


def backward_ops_of(checkout, op_name: str) -> list[str]:
    """The `*_backward` ops the forward op's formulas call (`sigmoid` -> `sigmoid_backward`)."""
    from porter.source.derivatives import calls_of
    return [name for name in calls_of(checkout, op_name) if name.endswith("_backward")]
